"""Redaction: every planted value goes, clean text stays, counts never carry values; each kind's
format and check, Chinese text around it, and the cheap tests that let a text skip a rule."""

from __future__ import annotations

import re
import sys

import pytest

from devtools import seeds
from devtools.corpus import PII_KINDS, clean_corpus, pii_corpus
from devtools.dialogues import SEED_KINDS, clean_dialogues, seeded_dialogues
from log_pipeline.metrics import REDACTION_KINDS
from log_pipeline.redaction import text as redact_module
from log_pipeline.redaction.rules import RULES, worded
from log_pipeline.redaction.text import KINDS, luhn_ok, redact
from log_pipeline.redaction.validators import cn_id_ok, iban_ok


def test_kinds_match_the_metric_label_set() -> None:
    assert set(KINDS) == set(REDACTION_KINDS) == set(SEED_KINDS)
    assert set(PII_KINDS) <= set(KINDS)


def test_every_planted_value_is_removed_and_counted_by_kind() -> None:
    corpus = pii_corpus(seed=7, size=1500)
    for entry in corpus:
        out, counts = redact(entry.text)
        for kind, value in entry.planted:
            assert value not in out, (kind, value)
            assert counts[kind] >= 1, (kind, value, out)
        assert all(v not in repr(dict(counts)) for _, v in entry.planted)


def test_clean_corpus_false_positive_rate_is_zero() -> None:
    corpus = clean_corpus(seed=11, size=3000)
    changed = [t for t in corpus if redact(t)[0] != t]
    rate = len(changed) / len(corpus)
    print(f"redaction false-positive rate on the clean corpus: {rate:.4%}")
    assert rate == 0.0, changed[:3]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("mail alice@example.com now", "email"),
        ("call (415) 555-2671", "phone"),
        ("card 4111 1111 1111 1111 ok", "card"),
        ("from 192.168.10.20 today", "ipv4"),
        ("host 2001:db8::8a2e:370:7334 up", "ipv6"),
        ("key sk-abcdefghijklmnopqrstuvwx", "api_key"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc", "bearer"),
        ("password=hunter2hunter2", "secret"),
        ("手机号13812345678，谢谢", "phone"),
        ("电话+86 138 1234 5678", "phone"),
        ("座机010-62345678", "phone"),
        ("号码是１３８１２３４５６７８", "phone"),  # full-width digits
        ("身份证号11010519491231002X", "cn_id"),
        ("身份证 310104198706151231 吗", "cn_id"),
        ("密码：Abc@12345", "secret"),
        ("我的密码是qwerty2024，登不上", "secret"),
        ("口令:hello-42", "secret"),
        ("支付密码123456没错", "secret"),
        ('{"user": "li", "password": "p@ss w0rd"}', "secret"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "secret"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "secret"),
        ("Cookie: sessionid=38afes7a8; csrftoken=x81kz0p", "secret"),
        ("Set-Cookie: SESSION=YWJjZGVmZ2g; Path=/; HttpOnly", "secret"),
        ("my password is Tr0ub4dor&3 ok", "secret"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "jwt"),
        ("-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBg\n-----END PRIVATE KEY-----", "private_key"),
        ("postgres://admin:S3cret%40x@db.example.com:5432/app", "url_credentials"),
        (
            "github_pat_11ABCDEFG0123456789abc_defghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVW",
            "api_key",
        ),
        ("glpat-abcdefghij0123456789", "api_key"),
        ("hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "api_key"),
        ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "api_key"),
        ("rk_live_4eC39HqLyjWDarjtT1zdp7dc", "api_key"),
        ("tp-" + "a1B2c3D4e5" * 4 + "xyz", "api_key"),  # the gateway's own keys
        ("IBAN DE89 3704 0044 0532 0130 00 please", "iban"),
        ("GB29NWBK60161331926819", "iban"),
        ("SSN 123-45-6789", "us_ssn"),
        ("my SSN is 123456789", "us_ssn"),
    ],
)
def test_each_kind(text: str, kind: str) -> None:
    out, counts = redact(text)
    assert f"[REDACTED:{kind}]" in out
    assert dict(counts) == {kind: 1}


@pytest.mark.parametrize(
    "text",
    [
        "4111 1111 1111 1112",
        "order 12345678 shipped",
        "version 1.2.3",
        "at 12:30:45",
        "2026-05-06",
        "订单号110105194912310022",  # an ID's shape with a wrong check digit
        "订单号110105194913310021",  # a month 13
        "订单号 25013112345",  # 11 digits that are no mobile
        "运单号SF1234567890123，YT1234567890123",
        "金额¥1,299.00，共3件",
        "版本 1.2.3.4",
        "App是3.0.7.2版本",
        "客服热线400-820-8820",
        "DE89 3704 0044 0532 0130 01",  # an IBAN with a wrong check
        "666-12-3456 and 123-00-4567",  # SSN rules
        "密码错误次数过多，请重置密码",
        "my password is incorrect",
        "the token expired",
        "pk_live_4eC39HqLyjWDarjtT1zdp7dc is publishable",
        "ftp://files.example.com/pub",
        "request id 8a2c28ee-0497-3553-6495-5dd7cc7e1931",
        "tp-link-archer-c7-router-manual",
    ],
)
def test_lookalikes_stay(text: str) -> None:
    assert redact(text)[0] == text


@pytest.mark.parametrize(
    ("text", "expected", "counts"),
    [  # the cheap tests that let a text skip a pattern must never skip one that matches
        ("ſecret=hunter2hunter2", "ſecret=[REDACTED:secret]", {"secret": 1}),  # ſ matches s
        ("İ PassWord: hunter2hunter2", "İ PassWord: [REDACTED:secret]", {"secret": 1}),
        ("auth: BeArEr abcdefghijkl", "auth: BeArEr [REDACTED:bearer]", {"bearer": 1}),
        ("BEARER abcdefghij é", "BEARER [REDACTED:bearer] é", {"bearer": 1}),
        ("call ٤١٥-٥٥٥-٢٦٧١ now", "call [REDACTED:phone] now", {"phone": 1}),  # Arabic digits
        ("card ٤١١١١١١١١١١١١١١١ x", "card [REDACTED:card] x", {"card": 1}),
        ("x +1 (415) 555-2671", "x [REDACTED:phone]", {"phone": 1}),  # starts before a digit
        ("1.2.3.4 and 10.0.0.1", "[REDACTED:ipv4] and [REDACTED:ipv4]", {"ipv4": 2}),
        ("fe80::1 then ::", "[REDACTED:ipv6] then ::", {"ipv6": 1}),
        (
            "token: abcdefgh at a.b@c.io or 415.555.2671",
            "token: [REDACTED:secret] at [REDACTED:email] or [REDACTED:phone]",
            {"secret": 1, "email": 1, "phone": 1},
        ),
    ],
)
def test_exact_output_and_counts(text: str, expected: str, counts: dict[str, int]) -> None:
    out, found = redact(text)
    assert (out, dict(found)) == (expected, counts)


@pytest.mark.parametrize(
    ("text", "expected", "counts"),
    [
        (  # a rule that starts its scan at a word finds it after an earlier rule moved it
            "the key sk-abcdefghijklmnopqrstuvwx and the AWS_SECRET_ACCESS_KEY=hunter2hunter2",
            "the key [REDACTED:api_key] and the AWS_SECRET_ACCESS_KEY=[REDACTED:secret]",
            {"api_key": 1, "secret": 1},
        ),
        (  # a value a rule before replaced is not redacted again under another kind
            "api_key=sk-abcdefghijklmnopqrstuvwx",
            "api_key=[REDACTED:api_key]",
            {"api_key": 1},
        ),
        (
            "用户：手机号13812345678，邮箱zhangwei@163.com",
            "用户：手机号[REDACTED:phone]，邮箱[REDACTED:email]",
            {"phone": 1, "email": 1},
        ),
        (  # the whole PEM block, cut short or not
            "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2\nQWxhZGRpbjpvcGVu"
            "\nThanks, bye",
            "key:\n[REDACTED:private_key]\nThanks, bye",
            {"private_key": 1},
        ),
        (  # the user and password go, the scheme and host stay
            "DATABASE_URL=mysql://root:pa55w0rd@db.internal:3306/db",
            "DATABASE_URL=mysql://[REDACTED:url_credentials]@db.internal:3306/db",
            {"url_credentials": 1},
        ),
        (  # a printed IBAN followed by a word in capitals ends where its length says
            "BE68 5390 0754 7034 FOR the refund",
            "[REDACTED:iban] FOR the refund",
            {"iban": 1},
        ),
        (
            'body {"username": "bob", "password": "correct horse"}',
            'body {"username": "bob", "password": "[REDACTED:secret]"}',
            {"secret": 1},
        ),
    ],
)
def test_exact_output_of_new_kinds(text: str, expected: str, counts: dict[str, int]) -> None:
    out, found = redact(text)
    assert (out, dict(found)) == (expected, counts)


def test_cn_id_check_digit_and_birth_date() -> None:
    assert cn_id_ok("11010519491231002X")
    assert cn_id_ok("11010519491231002x")
    assert not cn_id_ok("110105194912310021")  # check digit
    assert not cn_id_ok("110105194902300028")  # 30 February
    assert not cn_id_ok("990105194912310021")  # no province 99
    assert not cn_id_ok("11010518491231002X")  # born 1849
    for value in (seeds.cn_id_number(__import__("random").Random(i)) for i in range(200)):
        assert cn_id_ok(value), value


def test_iban_mod_97() -> None:
    assert iban_ok("GB82WEST12345698765432")
    assert iban_ok("DE89 3704 0044 0532 0130 00")
    assert not iban_ok("GB82WEST12345698765433")
    assert not iban_ok("GB82WEST1234569876543")  # GB is 22 long
    assert not iban_ok("XX82WEST12345698765432")  # no such country


def test_other_digits_are_every_non_ascii_digit() -> None:
    every = {chr(c) for c in range(0x80, sys.maxunicode + 1) if re.match(r"\d", chr(c))}
    listed = set(redact_module._OTHER_DIGITS.findall("".join(sorted(every))))
    assert listed == every


def test_worded_rules_are_never_skipped_when_they_match() -> None:
    texts = [d.text for d in seeded_dialogues(3, 600)] + [d.text for d in clean_dialogues(4, 300)]
    texts += [e.text for e in pii_corpus(seed=5, size=300)]
    for text in texts:
        low = redact_module._lower(text)
        for rule in RULES:
            if rule.worded and rule.pattern.search(text):
                assert worded(text, low), (rule.kind, text)
                assert rule.gate is None or rule.gate(text, low), (rule.kind, text)


def test_lowering_keeps_offsets() -> None:
    text = "İ ſecret ı K 密码"
    assert len(redact_module._lower(text)) == len(text)


def test_luhn() -> None:
    assert luhn_ok("4111111111111111")
    assert not luhn_ok("4111111111111112")
    assert not luhn_ok("411111")  # too short for a card
