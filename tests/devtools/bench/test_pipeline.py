"""The pipeline bench: a tiny run that must account for every record."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from devtools.bench import pipeline


@pytest.mark.slow  # the bench end to end: `make test`, not the inner loop
def test_a_tiny_run_reports_every_figure_and_the_writer_wrote_every_record() -> None:
    argv = ["--records", "300", "--phase-seconds", "0.5", "--trials", "2", "--rounds", "2",
            "--delay-seconds", "1", "--delay-rps", "40", "--sampling-requests", "200",
            "--json"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "pipeline", *argv],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]  # the bench's own error line, if it failed
    result = json.loads(done.stdout)
    assert result["sink_records_written"] == result["sink_requests"] > 0
    assert result["sink_records_dropped"] == 0
    # every round has its ratios, or is counted as a round in which a gateway answered nothing
    rounds = len(result["gateway_round_ratios"]) + result["rounds_without_ratio"]
    assert rounds == len(result["control_round_ratios"]) + result["rounds_without_ratio"] == 4
    assert len(result["gateway_trial_ratios"]) == len(result["control_trial_ratios"]) == 2
    assert result["gateway_capacity_ratio"] > 0 and result["sink_writer_cpu_share_in_rounds"] >= 0
    assert result["delay_records"] == 40
    for output in ("sqlite", "elasticsearch"):
        assert 0 < result[f"delay_{output}_p95_s"] < math.inf
    assert result["sink_writer_cpu_ms_per_request"] >= 0
    assert set(result["generator"]) == {"max_cpu", "max_loop_lag_s", "saturated"}
    shares = result["sampling_shares"]
    assert abs(sum(shares.values()) - 1) < 1e-9
    # every request reaches its own max_tokens: none is kept as truncated, head sampling decides
    assert shares["kept_low_quality"] == 0
    assert 0 < shares["skipped_not_sampled"] < 1


@pytest.mark.parametrize(
    "flag", ["--trials=0", "--rounds=-1", "--sampling-requests=0", "--phase-seconds=nan",
             "--delay-rps=0", "--delay-seconds=-2"],
)  # fmt: skip
def test_unusable_flags_are_one_clear_error_not_a_traceback(flag: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "pipeline", flag],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert flag.split("=")[0] in done.stderr and "Traceback" not in done.stderr


def test_a_round_in_which_a_gateway_answered_nothing_has_no_ratio() -> None:
    # CI r13: on a busy machine the `off` gateway answered nothing in a 0.5 s round, and the
    # bench died dividing by it
    t: dict = {"round_on": [], "round_control": [], "rounds_without_ratio": 0}
    pipeline.round_ratios(t, {"off": 10, "control": 12, "on": 11})
    pipeline.round_ratios(t, {"off": 0, "control": 3, "on": 2})
    assert t == {"round_on": [1.0], "round_control": [1.2], "rounds_without_ratio": 1}
