"""`tokenpulse bench streaming` runs end to end on the tiny model through a real gateway."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_quick_run_reports_ttft_throughput_and_batch_against_unary(model_base: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "streaming",
         "--model-base-path", str(model_base), "--quick", "--first-chunk", "4", "--chunk", "4",
         "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "c=4 round 1: stream" in done.stderr  # progress goes to stderr
    doc = json.loads(done.stdout)
    rows = {(r["concurrency"], r["mode"]): r for r in doc["rows"]}
    assert set(rows) == {(c, m) for c in (1, 4) for m in ("unary", "stream")}
    for (conc, _mode), r in rows.items():
        assert r["requests"] > 0 and r["errors"] == 0 and r["tokens_per_s"] > 0, (
            r,
            done.stderr[-3000:],
        )
        assert 1.0 <= r["mean_batch"] <= conc  # read from the model server's own histogram
    f = doc["figures"]
    # timings are reported, never asserted: on 8 tokens a call's fixed cost dominates
    assert 0 < f["ttft_p50_ms"] <= f["ttft_p99_ms"] and f["unary_p50_ms"] > 0
    assert f["ttft_ratio"] == round(f["ttft_p50_ms"] / f["unary_p50_ms"], 3)
    assert f["throughput_ratio"] > 0 and f["mean_batch"] == rows[(4, "stream")]["mean_batch"]
    assert set(doc["met"]) == set(doc["targets"])
