"""The bench harness: latency summaries, RSS, CPU pinning and the load generator's verdict."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

from devtools.bench.harness import (
    cpu_split,
    generator_line,
    latency_ms,
    median_time,
    pin,
    rss_bytes,
)


def test_latency_summary_in_milliseconds():
    lat = latency_ms([0.001, 0.002, 0.003, 0.010])  # quantiles between ranks, as the load test's
    assert lat == pytest.approx(
        {"mean_ms": 4.0, "p50_ms": 2.5, "p90_ms": 7.9, "p99_ms": 9.79, "max_ms": 10.0}
    )
    assert all(math.isnan(v) for v in latency_ms([]).values())


def test_median_time_warms_up_once_then_times_each_repeat():
    calls = []
    assert median_time(lambda: calls.append(1), repeats=3) >= 0
    assert len(calls) == 4


def test_rss_grows_with_memory_the_process_touches():
    code = "import sys; b = bytearray(64 * 2**20); print('ok', flush=True); sys.stdin.read()"
    with subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == "ok\n"
        rss, peak = rss_bytes(proc.pid)
        proc.communicate("")
    assert rss >= 64 * 2**20 and peak >= rss
    own, own_peak = rss_bytes(os.getpid())
    assert 0 < own <= own_peak


def test_pin_sets_every_threads_affinity():
    split = cpu_split()
    cpus = sorted(os.sched_getaffinity(0))
    if split is None:
        assert len(cpus) < 2
        return
    rest, last = split
    assert rest | last == set(cpus) and last == {cpus[-1]} and not rest & last
    with subprocess.Popen(
        [sys.executable, "-c", "input()"], stdin=subprocess.PIPE, text=True
    ) as proc:
        pin(proc.pid, last)
        assert os.sched_getaffinity(proc.pid) == last
        proc.communicate("\n")


def test_the_generators_verdict_is_one_line_either_way() -> None:
    calm = {"max_cpu": 0.42, "max_loop_lag_s": 0.012, "saturated": None}
    assert generator_line(calm) == (
        "load generator: not saturated (its event loop used at most 42% of a core, woke 12 ms late)"
    )
    busy = calm | {"saturated": "the load generator saturated itself at 3s (...)"}
    assert generator_line(busy).startswith("load generator: SATURATED (")
    assert busy["saturated"] in generator_line(busy)
    short = {"max_cpu": None, "max_loop_lag_s": None, "saturated": None}
    assert generator_line(short) == "load generator: not saturated (no phase ran a whole second)"
