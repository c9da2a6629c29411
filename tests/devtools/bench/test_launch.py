"""`tokenpulse bench launch` starts a component both ways and sets them side by side (figures
only, no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_both_ways_are_started_and_reported_side_by_side() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "launch", "--components", "gateway",
         "--starts", "2", "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "round 2/2" in done.stderr  # progress goes to stderr
    doc = json.loads(done.stdout)
    (row,) = doc["components"]
    assert row["component"] == "gateway"
    for way in ("exec", "zygote"):
        assert row[f"{way}_cpu_s"] > 0 and row[f"{way}_ready_s"] > 0
    assert row["cpu_ratio"] == row["zygote_cpu_s"] / row["exec_cpu_s"]
    assert row["zygote"] == "light" and row["zygote_start_cpu_s"] > 0


def test_a_bad_count_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "launch", "--starts", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "must be at least 1" in done.stderr
    assert "Traceback" not in done.stderr
