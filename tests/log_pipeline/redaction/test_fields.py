"""Every free-text field of a sample is redacted before the spool, not only prompt and output."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from log_pipeline.redaction.fields import redact_sample
from log_pipeline.spool import list_segments
from tests.log_pipeline.conftest import make_sample, write_samples
from tokenpulse.samples import RequestStats, Sample

SECRETS = {
    "request_id": "sk-abcdefghijklmnopqrstuvwxyz012345",  # what X-Request-ID's charset allows
    "model": "gpt ghp_abcdefghijklmnopqrstuvwxyz0123456789",  # a failed request keeps it as sent
    "version_label": "canary alice@example.com",
    "key_id": "13812345678",
    "error_code": "password=hunter22hunter22",
    "prompt": "身份证号11010519491231002X",
    "output": "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
    "stop": "密码：Abc@12345",
    "user": "bob@example.org",
}


def _secret_sample(status: int) -> Sample:
    stats = RequestStats(
        request_id=SECRETS["request_id"], route="completions", model=SECRETS["model"],
        version="", version_label=SECRETS["version_label"], key_id=SECRETS["key_id"],
        status=status, error_code=SECRETS["error_code"] if status >= 400 else "",
    )  # fmt: skip
    base = make_sample(1, status=status)
    return Sample(
        stats,
        prompts=(SECRETS["prompt"],),
        outputs=(SECRETS["output"],) if status < 400 else (),
        params={"max_new_tokens": 8, "stop": [SECRETS["stop"]], "user": SECRETS["user"]},
        timestamp=base.timestamp,
    )


def test_every_free_text_field_is_redacted_on_success_and_failure(spool: Path) -> None:
    writer = write_samples(spool, [_secret_sample(200), _secret_sample(404)])
    data = b"".join(p.read_bytes() for p in list_segments(spool)).decode()
    lines = [json.loads(line) for line in data.splitlines()]
    assert len(lines) == 2
    for name, value in SECRETS.items():
        if name in ("stop", "user"):
            continue  # not in the record (yet); redact_sample covers them below
        secret = value.split()[-1].split("=")[-1].removeprefix("身份证号")
        assert secret not in data, (name, secret)
    failed = lines[1]
    assert failed["gen_ai"]["request"]["model"] == "gpt [REDACTED:api_key]"
    assert failed["genai_sample"]["request_id"] == "[REDACTED:api_key]"
    counted = writer.registry.get_sample_value
    assert counted("tokenpulse_sampler_redactions_total", {"kind": "api_key"}) == 4  # 2 x 2


def test_redact_sample_covers_every_string_field_and_parameter() -> None:
    counts: Counter[str] = Counter()
    out = redact_sample(_secret_sample(200), counts)
    text = repr(out)
    for name, value in SECRETS.items():
        secret = value.split()[-1].split("=")[-1].split("：")[-1].removeprefix("身份证号")
        assert secret not in text, (name, secret)
    assert out.params["max_new_tokens"] == 8
    assert counts == Counter(
        {"api_key": 2, "email": 2, "phone": 1, "secret": 1, "cn_id": 1, "jwt": 1}
    )


def test_a_clean_sample_keeps_its_objects() -> None:
    sample = make_sample(3)
    out = redact_sample(sample, Counter())
    assert out.stats is sample.stats and out.params is sample.params
    assert out == sample
