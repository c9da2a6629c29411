"""`--against`: deltas and a verdict between two reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stack.loadtest.compare import compare, write
from stack.loadtest.engine import LoadtestError


def _doc(p99: float, goodput: float, kind: str = "run") -> dict[str, Any]:
    client = {
        "latency_s": {"mean": p99 / 2, "p50": p99 / 3, "p99": p99},
        "throughput_rps": goodput,
        "goodput_rps": goodput,
        "output_tokens_per_s": goodput * 10,
        "error_ratio": 0.0,
    }
    run = {"rate": 5.0, "client": client, "server": {"summary": {"batch_size_mean": 2.0}}}
    return {"kind": kind, "runs": [run]}


def test_faster_with_more_goodput_is_better_and_the_reverse_is_worse() -> None:
    better = compare(_doc(0.2, 10), _doc(0.4, 8))
    assert better["verdict"].startswith("better")
    rows = {r["metric"]: r for r in better["rows"]}
    assert rows["latency p99 s"]["relative"] == pytest.approx(-0.5)
    assert rows["latency p99 s"]["judgement"] == "better"
    assert rows["server batch size"]["judgement"] == "same"
    assert compare(_doc(0.4, 8), _doc(0.2, 10))["verdict"].startswith("worse")
    assert compare(_doc(0.2, 10), _doc(0.201, 10))["verdict"].startswith("no change")


def test_write_puts_the_comparison_beside_the_new_report(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    for d, doc in ((old, _doc(0.4, 8)), (new, _doc(0.2, 10))):
        d.mkdir()
        (d / "summary.json").write_text(json.dumps(doc))
    result = write(new, old)
    assert result["verdict"].startswith("better")
    page = (new / "compare.html").read_text()
    assert "Verdict: better" in page and "data:image/png;base64," in page
    with pytest.raises(LoadtestError, match="summary.json"):
        write(new, tmp_path / "missing")
