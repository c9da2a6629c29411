"""`tokenpulse bench batching` runs end to end against the tiny model (figures only)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_bench_reports_both_modes_ratios_and_overhead(model_base: Path):
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "batching",
         "--model-base-path", str(model_base), "--concurrency", "1,4", "--duration", "1",
         "--rate", "4", "--max-new-tokens", "2", "--overhead-calls", "3", "--json"],
        capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    rows = {(r["batching"], r["mode"], r["concurrency"]) for r in report["results"]}
    assert rows == {(b, m, c) for b in (False, True) for m, c in
                    (("closed", 1), ("closed", 4), ("open", None))}  # fmt: skip
    assert all(r["requests"] > 0 and r["errors"] == 0 for r in report["results"])
    assert len(report["ratios_on_vs_off"]) == 3
    assert set(report["overhead"]) == {"batching_off", "batching_on"}


def test_without_a_model_it_says_what_to_do(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "batching",
         "--model-base-path", str(tmp_path / "nope")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "make model" in done.stderr
    assert "Traceback" not in done.stderr
