"""The bench harness: nearest-rank percentiles, latency summaries and /proc readings."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

from devtools.bench.harness import (
    cpu_seconds,
    cpu_split,
    latency_ms,
    median_time,
    percentile,
    pin,
    rss_bytes,
)


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile(values[::-1], 1) == 1.0  # order of the input does not matter
    assert percentile([7.0, 1.0, 3.0], 50) == 3.0
    assert percentile([5.0], 99) == 5.0


@pytest.mark.parametrize("q", [0, -1, 100.5])
def test_percentile_rejects_ranks_outside_0_100(q):
    with pytest.raises(ValueError, match="rank"):
        percentile([1.0, 2.0], q)


def test_percentile_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_latency_summary_in_milliseconds():
    lat = latency_ms([0.001, 0.002, 0.003, 0.010])
    assert lat == pytest.approx(
        {"mean_ms": 4.0, "p50_ms": 2.0, "p90_ms": 10.0, "p99_ms": 10.0, "max_ms": 10.0}
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


def test_cpu_seconds_counts_work_done():
    code = (
        "import time\nwhile time.process_time() < 0.5:\n pass\nprint('done', flush=True)\ninput()"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == "done\n"
        # /proc counts in clock ticks and may trail the process's own clock by a tick or two
        burnt = cpu_seconds(proc.pid)
        proc.communicate("\n")
    assert 0.4 <= burnt < 5


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
