"""The writer: records land redacted and say why; the disk cap drops exactly what does not fit."""

from __future__ import annotations

import json
from pathlib import Path

from log_pipeline.spool import list_segments
from tests.log_pipeline.conftest import make_sample, write_samples


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
