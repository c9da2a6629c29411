"""`--find-max` finds a known capacity: a stand-in serving 2 at a time, 0.1 s each (20/s)."""

from __future__ import annotations

import json
from pathlib import Path

from devtools.standins.tfserving import StandinState, TfServingStandin
from stack import cli

CAPACITY = 20.0  # max_concurrency / service_time_s


def test_find_max_reports_the_capacity_with_its_evidence(tmp_path: Path) -> None:
    state = StandinState(service_time_s=0.1, max_concurrency=2)
    with TfServingStandin(state) as tfs:
        rc = cli.main([
            "loadtest", "--url", tfs.url, "--route", "tfserving", "--find-max",
            "--arrival", "constant", "--duration-s", "1.5", "--find-max-start", "8",
            "--find-max-repeats", "1", "--find-max-tolerance", "0.15", "--slo-latency-s", "0.3",
            "--no-progress", "--report-dir", str(tmp_path),
        ])  # fmt: skip
    assert rc == 0
    doc = json.loads((tmp_path / "summary.json").read_text())
    found = doc["find_max"]
    # a queue builds above capacity, so the 0.3 s bound breaks there; below it nothing waits
    assert 0.6 * CAPACITY <= found["max_rate"] <= 1.25 * CAPACITY
    assert found["first_broken"] > found["max_rate"]
    held = [p for p in found["probes"] if p["held"]]
    broke = [p for p in found["probes"] if not p["held"]]
    assert max(p["rate"] for p in held) == found["max_rate"]
    assert all("p99" in p["reasons"][0] for p in broke)  # the evidence says why
    assert doc["slo"]["latency_s"] == 0.3 and doc["slo"]["error_ratio"] == 0.005  # the mixin's
    assert (tmp_path / "latency_vs_rate.png").stat().st_size > 0
