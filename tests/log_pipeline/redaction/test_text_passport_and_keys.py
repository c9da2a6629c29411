"""Passport numbers and private keys in prompts (issue 30 D.13): a PRC passport number said to
be one goes, in every current format; a private key's body goes however a paste or a JSON
string mangled it; public keys and certificates, which are no secret, stay."""

from __future__ import annotations

import base64
import json
import random

import pytest

from log_pipeline.redaction.text import redact

P = "[REDACTED:passport]"
K = "[REDACTED:private_key]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("护照号码E73920584，姓名王磊", f"护照号码{P}，姓名王磊"),
        ("我的护照号是 EH4038217 ，下周出发", f"我的护照号是 {P} ，下周出发"),
        ("证件类型：护照  证件号码：EK5038291", f"证件类型：护照  证件号码：{P}"),
        ("旧护照G50271946已经过期", f"旧护照{P}已经过期"),
        ("公务护照 SE3920147 由单位保管", f"公务护照 {P} 由单位保管"),
        ("Passport No.: EB7719024 (issued 2023)", f"Passport No.: {P} (issued 2023)"),
        ("my passport number is e60418273", f"my passport number is {P}"),
        ("ES2940751 is my new passport", f"{P} is my new passport"),
        ("护照：EA1038475；EC2290461 是我太太的", f"护照：{P}；{P} 是我太太的"),
    ],
)
def test_passport_numbers_said_to_be_passports_go(text: str, expected: str) -> None:
    out, counts = redact(text)
    assert out == expected
    assert counts["passport"] == expected.count(P)


@pytest.mark.parametrize(
    "text",
    [
        "错误码E73920584，请重启",  # the shape, but nobody said passport
        "护照已寄出，EMS单号EA103847562CN",  # an EMS number: 9 digits and CN
        "护照加急订单号E20260512000183947",  # an 18-character order number
        "护照办理需要7个工作日，费用120元",
        "passport photo 33x48mm, code G5027194",  # 7 digits
        "Passport renewal ticket #EH40382170",  # 8 digits after the letters: no format
    ],
)
def test_passport_lookalikes_stay(text: str) -> None:
    assert redact(text)[0] == text


def _body(seed: int, size: int, width: int = 64) -> list[str]:
    data = base64.b64encode(random.Random(seed).randbytes(size)).decode()
    return [data[i : i + width] for i in range(0, len(data), width)]


def _gone(out: str, lines: list[str]) -> None:
    assert [line for line in lines if len(line) >= 16 and line in out] == []


def test_json_escaped_key_cut_off_inside_its_string() -> None:
    lines = _body(301, 900)[:6]
    block = "\n".join(["-----BEGIN PRIVATE KEY-----", *lines])
    text = json.dumps({"prompt": "为什么这个私钥加载失败？\n" + block, "max_tokens": 64})
    out, counts = redact(text)
    _gone(out, lines)
    assert counts == {"private_key": 1}
    assert out.endswith(f'\\n{K}", "max_tokens": 64}}')


def test_json_escaped_crlf_and_double_escaped_keys() -> None:
    lines = _body(302, 600)
    block = "\r\n".join(["-----BEGIN RSA PRIVATE KEY-----", *lines[:4]])
    for text in (json.dumps({"k": block}), json.dumps(json.dumps({"k": block}))):
        out, counts = redact(text)
        _gone(out, lines)
        assert counts == {"private_key": 1}


def test_legacy_encrypted_key_with_headers_and_blank_line_cut_short() -> None:
    lines = _body(303, 1192)[:5]
    text = "\n".join(
        [
            "server.key 是这样的：",
            "-----BEGIN RSA PRIVATE KEY-----",
            "Proc-Type: 4,ENCRYPTED",
            "DEK-Info: AES-256-CBC,9F3A61C0B2D54E7788A1C3E5F7092B4D",
            "",
            *lines,
        ]
    )
    out, counts = redact(text)
    _gone(out, lines)
    assert out == f"server.key 是这样的：\n{K}"
    assert counts == {"private_key": 1}


def test_key_flattened_onto_one_line_and_cut_off() -> None:
    lines = _body(304, 400, width=70)[:3]
    text = "DEPLOY_KEY=-----BEGIN OPENSSH PRIVATE KEY----- " + " ".join(lines) + " then what?"
    out, counts = redact(text)
    _gone(out, lines)
    assert out == f"DEPLOY_KEY={K} then what?"
    assert counts == {"private_key": 1}


def test_key_cut_mid_line_with_prose_after_it_and_body_on_the_begin_line() -> None:
    lines = _body(305, 700)
    text = "-----BEGIN EC PRIVATE KEY-----" + "\n".join(lines[:3]) + lines[3][:40] + " 后面没了"
    out, counts = redact(text)
    _gone(out, [*lines[:3], lines[3][:40]])
    assert out == f"{K} 后面没了"
    assert counts == {"private_key": 1}


@pytest.mark.parametrize(
    "label", ["RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY", "ENCRYPTED PRIVATE KEY"]
)
def test_prose_after_a_cut_key_stays(label: str) -> None:
    lines = _body(306, 500)[:4]
    text = "\n".join([f"-----BEGIN {label}-----", *lines, "Is this the right format?", "谢谢"])
    out, _ = redact(text)
    assert out == f"{K}\nIs this the right format?\n谢谢"


def _block(label: str, seed: int) -> str:
    return "\n".join([f"-----BEGIN {label}-----", *_body(seed, 294), f"-----END {label}-----"])


@pytest.mark.parametrize(
    "text",
    [  # public halves and certificates are published on purpose: redacting them helps nobody
        "our public key:\n" + _block("PUBLIC KEY", 310),
        "证书如下：\n" + _block("CERTIFICATE", 311) + "\n请帮我看看有效期",
        _block("RSA PUBLIC KEY", 312),
        _block("CERTIFICATE REQUEST", 313),
        "ssh-ed25519 " + base64.b64encode(random.Random(314).randbytes(51)).decode() + " ops@ci",
        json.dumps({"cert": _block("CERTIFICATE", 315) + "\n"}),
    ],
)
def test_public_keys_and_certificates_stay(text: str) -> None:
    assert redact(text)[0] == text


def test_a_certificate_after_a_cut_key_stays() -> None:
    cert = _block("CERTIFICATE", 316)
    lines = _body(317, 600)[:3]
    text = "\n".join(["-----BEGIN PRIVATE KEY-----", *lines, cert])
    out, counts = redact(text)
    assert out == f"{K}\n{cert}"
    assert counts == {"private_key": 1}
