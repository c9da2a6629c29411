"""`tokenpulse bench training --json` runs a tiny comparison end to end (figures only; no timing is
asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.scheduling import COMPUTING_TEST_TIMEOUT_S, COMPUTING_TIMEOUT_S


@pytest.mark.slow
@pytest.mark.timeout(COMPUTING_TEST_TIMEOUT_S)
def test_bench_times_the_step_with_and_without_histograms() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "training", "--preset", "tiny",
         "--every", "2", "--pairs", "1", "--events", "1", "--json"],
        capture_output=True, text=True, timeout=COMPUTING_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["preset"] == "tiny" and result["every"] == 2
    assert len(result["block_step_ms_off"]) == len(result["block_step_ms_on"]) == 1
    assert result["step_ms_off"] > 0 and result["step_ms_on"] > 0 and result["event_ms"] > 0
    assert result["histograms_per_event"] == 2 * 28  # tiny: 2 blocks of 12 weights, and 4 more
    assert set(result["overhead_from_event"]) == {"10", "25", "50", "100", "200"}
    assert result["budget"] == 0.05


@pytest.mark.slow
@pytest.mark.timeout(COMPUTING_TEST_TIMEOUT_S)
def test_bench_compares_one_worker_with_two_and_times_the_collectives() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "training", "--preset", "tiny",
         "--workers", "2", "--steps", "2", "--warmup", "1", "--json"],
        capture_output=True, text=True, timeout=COMPUTING_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["preset"], result["workers"], result["steps"]) == ("tiny", 2, 2)
    one, many = result["one_worker"], result["n_workers"]
    assert set(one) == {"step_ms", "tokens_per_s"}
    assert {"step_ms", "tokens_per_s", "all_reduce_ms", "collective_share"} <= set(many)
    for figures in (one, many):
        assert figures["step_ms"] > 0
        assert figures["tokens_per_s"] == pytest.approx(
            result["tokens_per_step"] / figures["step_ms"] * 1e3)  # fmt: skip
    assert result["speedup"] == pytest.approx(one["step_ms"] / many["step_ms"])
    assert 0 < many["collective_share"] <= 1 and many["replicas"] == 2
    assert many["gradient_bytes"] > 0 and "all-reduce" in result["collective_method"]
