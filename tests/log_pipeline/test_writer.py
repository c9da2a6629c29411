"""The writer: records land redacted and say why; the disk cap drops exactly what does not fit."""

from __future__ import annotations

import json
import random
from pathlib import Path

from log_pipeline.sampler import SamplingRules
from log_pipeline.settings import SinkSettings
from log_pipeline.spool import list_segments
from log_pipeline.writer import SampleWriter
from tests.log_pipeline.conftest import make_sample, write_samples
from tokenpulse.samples import Feedback


def records(spool: Path) -> list[dict[str, object]]:
    """Every record in the spool, in order."""
    return [json.loads(ln) for p in list_segments(spool) for ln in p.read_text().splitlines()]


def test_records_are_redacted_and_say_why(spool: Path) -> None:
    writer = write_samples(spool, [make_sample(1, prompt="mail bob@example.com", status=200),
                                   make_sample(2, status=502)])  # fmt: skip
    first, second = records(spool)
    assert "bob@example.com" not in json.dumps(first)
    assert first["genai_sample"]["prompt"]["text"] == "mail [REDACTED:email]"  # type: ignore[index]
    assert first["genai_sample"]["sampling"]["reasons"] == ["head"]  # type: ignore[index]
    assert second["genai_sample"]["sampling"]["reasons"] == ["error"]  # type: ignore[index]
    assert writer.registry.get_sample_value("tokenpulse_spool_records_written_total") == 2
    assert (
        writer.registry.get_sample_value("tokenpulse_sampler_redactions_total", {"kind": "email"})
        == 1
    )


def test_the_disk_cap_drops_and_counts_exactly_what_does_not_fit(spool: Path) -> None:
    writer = write_samples(spool, [make_sample(i) for i in range(40)], cap_bytes=4096)
    written = writer.registry.get_sample_value("tokenpulse_spool_records_written_total")
    dropped = writer.registry.get_sample_value(
        "tokenpulse_spool_records_dropped_total", {"reason": "disk_cap"}
    )
    assert written and dropped and written + dropped == 40
    assert len(records(spool)) == written
    assert sum(p.stat().st_size for p in list_segments(spool)) <= 4096


# ---- feedback -----------------------------------------------------------------------------------


def _feedback_writer(spool: Path, now: list[float], **settings: object) -> SampleWriter:
    """A writer that keeps nothing on its own (head rate 0, no always-keep rule) on a fake clock."""
    config = SinkSettings.model_validate({"spool_dir": spool, **settings})
    writer = SampleWriter(config, rng=random.Random(1), clock=lambda: now[0])
    writer.sampler.rules = SamplingRules.model_validate({
        "head_rate": 0.0, "caps": {"per_key_per_minute": 0},
        "always_keep": {"errors": False, "slow_s": 0, "empty": False, "repetition_ratio": 0,
                        "mean_nll": 0, "truncated": False, "canary_labels": []},
    })  # fmt: skip
    return writer


def _fb(i: int, score: float = -1, comment: str = "", t: float = 0.0) -> Feedback:
    return Feedback(f"req-{i}", f"cmpl-req-{i}", "key-a", score, "thumbs", comment, t, "gen", "1")


def _outcomes(writer: SampleWriter) -> dict[str, float]:
    return {
        o: writer.registry.get_sample_value("tokenpulse_sampler_feedback_total", {"outcome": o})
        or 0.0
        for o in ("promoted", "attached", "late")
    }


def test_feedback_in_the_window_keeps_a_skipped_request(spool: Path) -> None:
    now = [0.0]
    writer = _feedback_writer(spool, now)
    writer.write(make_sample(1, prompt="call 13812345678"))  # skipped: held
    assert records(spool) == [] and writer.held == 1
    now[0] = 599.0
    assert writer.feedback(_fb(1, comment="bad; I am jane.doe@example.com"))
    writer.close()
    (rec,) = records(spool)
    sample = rec["genai_sample"]
    assert sample["sampling"]["reasons"] == ["feedback"]  # type: ignore[index]
    assert sample["prompt"]["text"] == "call [REDACTED:phone]"  # type: ignore[index]
    fb = sample["feedback"]  # type: ignore[index]
    assert fb["class"] == "negative" and fb["outcome"] == "promoted"
    assert fb["comment"] == "bad; I am [REDACTED:email]" and fb["response_id"] == "cmpl-req-1"
    assert sample["redaction"]["kinds"] == {"phone": 1, "email": 1}  # type: ignore[index]
    assert writer.held == 0 and _outcomes(writer)["promoted"] == 1
    assert writer.registry.get_sample_value(
        "tokenpulse_sampler_samples_kept_total", {"reason": "feedback"}) == 1  # fmt: skip


def test_feedback_after_the_window_is_stored_on_its_own_and_counted(spool: Path) -> None:
    now = [0.0]
    writer = _feedback_writer(spool, now, feedback_window_s=600)
    writer.write(make_sample(1))
    now[0] = 601.0
    writer.housekeeping()
    assert writer.held == 0
    assert writer.feedback(_fb(1, score=1, t=1_780_000_601.0))
    writer.sampler.rules.head_rate = 1.0
    writer.write(make_sample(2))  # kept: its feedback is attached, not a second sample
    assert writer.feedback(_fb(2))
    writer.close()
    late, kept, attached = records(spool)
    assert late["message"] == "generation feedback"
    assert late["genai_sample"]["kind"] == "feedback"  # type: ignore[index]
    assert late["genai_sample"]["feedback"]["outcome"] == "late"  # type: ignore[index]
    assert late["genai_sample"]["request_id"] == "req-1"  # type: ignore[index]
    assert late["@timestamp"] == "2026-05-28T20:36:41.000Z"
    assert "prompt" not in late["genai_sample"]  # type: ignore[operator]
    assert kept["genai_sample"]["sampling"]["reasons"] == ["head"]  # type: ignore[index]
    assert attached["genai_sample"]["feedback"]["outcome"] == "attached"  # type: ignore[index]
    assert _outcomes(writer) == {"promoted": 0, "attached": 1, "late": 1}


def test_the_held_window_is_bounded_in_records_and_bytes(spool: Path) -> None:
    now = [0.0]
    writer = _feedback_writer(spool, now, feedback_window_records=3, feedback_window_bytes=1 << 20)
    for i in range(5):
        writer.write(make_sample(i))
    assert writer.held == 3  # the two oldest went first, counted
    assert writer.registry.get_sample_value("tokenpulse_sampler_held_evicted_total") == 2
    assert writer.feedback(_fb(0))  # evicted: late
    assert writer.feedback(_fb(4))  # held: promoted
    assert _outcomes(writer) == {"promoted": 1, "attached": 0, "late": 1}
    small = _feedback_writer(spool / "b", now, feedback_window_bytes=2000)
    for i in range(5):
        small.write(make_sample(i, prompt="x" * 600))  # ~1100 bytes each: one fits
    assert small.held == 1
    small.housekeeping()
    assert small.registry.get_sample_value("tokenpulse_sampler_held_requests") == 1
    off = _feedback_writer(spool / "c", now, feedback_window_s=0)
    off.write(make_sample(1))
    assert off.held == 0
    writer.close()
    small.close()
    off.close()
