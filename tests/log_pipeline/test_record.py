"""The record follows SCHEMA.md and the asset mappings, field for field."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from log_pipeline import assets
from log_pipeline.reader import parse_line
from log_pipeline.record import (
    encode_feedback_record,
    encode_records,
    feedback_fields,
    feedback_json,
    record_id,
)
from log_pipeline.sampler import max_new_tokens, truncated
from tests.log_pipeline.conftest import make_sample
from tests.support.records import build_records
from tokenpulse import paths
from tokenpulse.samples import Feedback, OutputSignals, Sample

SCHEMA = paths.ROOT / "log_pipeline" / "SCHEMA.md"
SAMPLE_ID = "a" * 32
FEEDBACK = Feedback("req-1", "cmpl-req-1", "key-a", 0.25, "unit", "c", 1_780_000_000.0, "gen", "7")


def _leaves(doc: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for key, value in doc.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and path != "genai_sample.redaction.kinds":
            out |= _leaves(value, path + ".")
        else:
            out.add(path)
    return out


def _schema_fields() -> dict[str, str]:
    rows = re.findall(r"^\| `([^`]+)` \| (\w+) \|", SCHEMA.read_text(), re.MULTILINE)
    return dict(rows)


def _records() -> list[dict[str, Any]]:
    ok = make_sample(1, mean_nll=5.0)
    failed = make_sample(2, status=503)
    return [
        *build_records(
            ok, ["p"], ["o"], ("low_quality",), 0.1, Counter({"email": 1}), sample_id=SAMPLE_ID
        ),
        *build_records(failed, ["p"], [], ("error",), 0.1, Counter(), sample_id="b" * 32),
        *build_records(ok, ["p"], ["o"], ("feedback",), 0.1, Counter(), sample_id="c" * 32,
                       feedback=feedback_fields(FEEDBACK, "c", "promoted")),
        json.loads(encode_feedback_record(FEEDBACK, "c", "late", Counter(), sample_id="d" * 32)),
    ]  # fmt: skip


def test_every_record_field_is_documented_with_its_type() -> None:
    documented = _schema_fields()
    seen = set().union(*(_leaves(r) for r in _records()))
    assert seen <= set(documented), sorted(seen - set(documented))


def test_schema_doc_and_mappings_agree() -> None:
    assert _schema_fields() == assets.FIELD_TYPES


def test_documented_fields_all_appear_in_some_record() -> None:
    seen = set().union(*(_leaves(r) for r in _records()))
    # request parameters only appear when the client sent them
    optional = {
        "gen_ai.request.top_p",
        "gen_ai.request.top_k",
        "gen_ai.request.seed",
        "gen_ai.request.stop_sequences",
        "gen_ai.server.time_to_first_token",
    }  # fmt: skip (streams only: see below)
    assert set(_schema_fields()) - optional <= seen


def test_envelope_values() -> None:
    ok, failed, promoted, alone = _records()
    assert promoted["genai_sample"]["feedback"]["value"] == -0.5
    assert promoted["genai_sample"]["feedback"]["class"] == "negative"
    assert alone["genai_sample"]["kind"] == "feedback" and alone["message"] == "generation feedback"
    assert list(alone)[:3] == ["@timestamp", "message", "event"]
    assert alone["gen_ai"]["response"]["id"] == "req-1"
    assert parse_line(encode_feedback_record(FEEDBACK, "", "late", Counter(), sample_id="e" * 32)
                      .rstrip(b"\n")) is not None  # fmt: skip
    assert ok["message"] == "generation sample"
    assert ok["event"]["id"] == record_id(SAMPLE_ID, 0) and len(ok["trace"]["id"]) == 32
    assert ok["event"]["outcome"] == "success" and failed["event"]["outcome"] == "failure"
    assert ok["event"]["duration"] == 100_000_000  # ECS: nanoseconds
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", ok["@timestamp"])
    assert ok["gen_ai"]["response"]["finish_reasons"] == ["stop"]
    assert ok["genai_sample"]["redaction"] == {"total": 1, "kinds": {"email": 1}}
    assert failed["error"]["type"] == "upstream_error"


def test_spool_lines_start_with_the_head_the_shipper_reads() -> None:
    for rec in _records():
        line = json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode()
        item = parse_line(line)
        assert item is not None and item._doc is None  # read from the head, no full parse
        assert (item.id, item.timestamp) == (rec["event"]["id"], rec["@timestamp"])
        assert item.doc == rec


def _variants() -> list[tuple[Sample, list[str], list[str], tuple[str, ...], Counter[str]]]:
    ok = make_sample(1, mean_nll=5.0, prompt='quote " back\\slash \n tab\t é 漢 \u2028 \x00')
    failed = make_sample(2, status=503)
    coded = make_sample(3, status=429)
    coded.stats.error_code = ""
    odd = make_sample(4, total_s=0)  # an int where a float is declared
    odd.stats.outputs.append(OutputSignals(1, 0, "length", True, float("nan"), float("inf")))
    odd.stats.version_label = ""
    odd.params.update({"top_k": 5, "seed": True, "top_p": 0.25, "max_tokens": 7})
    tiny = make_sample(5, total_s=123456789.1234565)  # rounding edges of the 6-decimal floats
    tiny.stats.queue_wait_s, tiny.stats.upstream_s = 5e-05, -0.0
    tiny.stats.outputs[0] = OutputSignals(3, 7, "stop", False, 0.0001, 1e12, 2)
    small = make_sample(6, total_s=0.0000995, mean_nll=2.0000004999)
    small.stats.outputs[0] = OutputSignals(3, 2, "stop", False, 0.99999951, -3.5)
    return [
        (ok, ["p"], ["o"], ("low_quality", "head"), Counter({"email": 1, "phone": 2})),
        (failed, ["p"], [], ("error",), Counter()),
        (coded, [], [], ("error", "slow"), Counter()),
        (odd, ["a", "b"], ["x", "y", "z"], ("canary",), Counter({"card": 1})),
        (odd, ["only"], ["x", "y"], ("head",), Counter()),
        (tiny, ["p"], ["o"], ("slow", "head"), Counter({"ipv4": 2, "secret": 1})),
        (small, ["p"], ["o"], ("slow", "head"), Counter()),
    ]


def test_encoded_lines_are_the_records_json_byte_for_byte() -> None:
    for sample, prompts, outputs, reasons, counts in _variants():
        expected = build_records(
            sample, prompts, outputs, reasons, 0.5, counts, sample_id=SAMPLE_ID
        )
        data, n = encode_records(
            sample, prompts, outputs, reasons, 0.5, counts, sample_id=SAMPLE_ID
        )
        dumped = b"".join(
            json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
            for r in expected
        )
        assert n == len(expected)
        assert data == dumped
    sample, prompts, outputs, reasons, counts = _variants()[0]
    expected = build_records(sample, prompts, outputs, reasons, 0.5, counts, sample_id=SAMPLE_ID,
                             feedback=feedback_fields(FEEDBACK, "c", "promoted"))  # fmt: skip
    data, _ = encode_records(sample, prompts, outputs, reasons, 0.5, counts, sample_id=SAMPLE_ID,
                             feedback=feedback_json(FEEDBACK, "c", "promoted"))  # fmt: skip
    assert data == b"".join(
        json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" for r in expected
    )


def _truncated(out: OutputSignals, params: dict[str, Any]) -> bool:
    """`genai_sample.quality.truncated` of a one-output sample, checked in both writers."""
    sample = make_sample(1)
    sample.stats.outputs = [out]
    sample = Sample(sample.stats, sample.prompts, sample.outputs, params, sample.timestamp)
    built = build_records(sample, ["p"], ["o"], ("head",), 0.1, Counter(), sample_id=SAMPLE_ID)
    data, _n = encode_records(sample, ["p"], ["o"], ("head",), 0.1, Counter(), sample_id=SAMPLE_ID)
    assert json.loads(data) == built[0]
    value = built[0]["genai_sample"]["quality"]["truncated"]
    assert value is truncated(out, max_new_tokens(params))  # the sampler's `truncated` rule
    return bool(value)


def test_truncated_means_against_the_users_intent() -> None:
    """A "length" finish at the request's own max_new_tokens is what it asked for; a prompt cut to
    fit the window, or an output stopped short of max_new_tokens, is truncated."""
    asked = OutputSignals(6, 16, "length", False, 0.0, 1.0)
    assert not _truncated(asked, {"max_new_tokens": 16})
    assert _truncated(OutputSignals(6, 9, "length", False, 0.0, 1.0), {"max_new_tokens": 16})
    assert _truncated(OutputSignals(6, 4, "stop", False, 0.0, 1.0, 3), {"max_new_tokens": 16})
    assert not _truncated(OutputSignals(6, 4, "stop", False, 0.0, 1.0), {"max_new_tokens": 16})
    assert not _truncated(OutputSignals(6, 9, "length", False, 0.0, 1.0), {})  # limit unknown


def test_a_streamed_sample_carries_time_to_first_token_and_its_chunks() -> None:
    sample = make_sample(7)
    stats = sample.stats
    stats.mode, stats.time_to_first_token_s, stats.decode_s, stats.chunks = "stream", 0.0421, 0.3, 3
    built = build_records(sample, ["p"], ["o"], ("head",), 0.1, Counter(), sample_id=SAMPLE_ID)
    data, _n = encode_records(sample, ["p"], ["o"], ("head",), 0.1, Counter(), sample_id=SAMPLE_ID)
    record = json.loads(data)
    assert record == built[0]
    assert record["gen_ai"]["server"] == {"time_to_first_token": 0.0421}
    assert record["genai_sample"]["timings"]["chunks"] == 3
    assert record["genai_sample"]["timings"]["time_per_output_token_s"] == 0.1  # 0.3 / (4 - 1)
    unary, _n = encode_records(
        make_sample(8), ["p"], ["o"], ("head",), 0.1, Counter(), sample_id=SAMPLE_ID
    )
    assert "server" not in json.loads(unary)["gen_ai"]
    assert json.loads(unary)["genai_sample"]["timings"]["chunks"] == 0


def test_a_chat_sample_is_a_chat_operation() -> None:
    sample = make_sample(9)
    sample.stats.route = "chat"
    built = build_records(sample, ["p"], ["o"], ("head",), 0.1, Counter(), sample_id=SAMPLE_ID)
    data, _n = encode_records(sample, ["p"], ["o"], ("head",), 0.1, Counter(), sample_id=SAMPLE_ID)
    assert json.loads(data) == built[0]
    assert built[0]["gen_ai"]["operation"]["name"] == "chat"
