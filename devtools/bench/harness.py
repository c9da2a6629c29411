"""What every `tokenpulse bench` shares: percentiles, timing, CPU and RSS readings, CPU pinning.

Benches start the components they measure with stack.launch (the launchers the tests
use too) and read the figures below; they print figures and ratios, and never assert on timing.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tokenpulse import paths
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

DEFAULT_BATCHING = paths.BATCHING_PARAMETERS
DEFAULT_MODEL_BASE = Path("models") / DEFAULT_MODEL_NAME  # where `make model` writes


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a bench that starts a model server: which model, which batching config."""
    parser.add_argument(
        "--model-base-path",
        type=Path,
        default=DEFAULT_MODEL_BASE,
        help=f"base path with numeric version dirs (default {DEFAULT_MODEL_BASE})",
    )
    parser.add_argument("--model-name", default=DEFAULT_MODEL_NAME)
    parser.add_argument("--batching-parameters-file", type=Path, default=DEFAULT_BATCHING)


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank `q`-th percentile (0 < q <= 100): the smallest value with at least q% of
    the values at or below it."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 < q <= 100:
        raise ValueError(f"percentile rank must be in (0, 100], got {q}")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def latency_ms(seconds: Sequence[float]) -> dict[str, float]:
    """Mean, p50, p90, p99 and max of latencies given in seconds, in milliseconds (NaN if none)."""
    if not seconds:
        return dict.fromkeys(("mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"), math.nan)
    return {
        "mean_ms": statistics.fmean(seconds) * 1e3,
        "p50_ms": percentile(seconds, 50) * 1e3,
        "p90_ms": percentile(seconds, 90) * 1e3,
        "p99_ms": percentile(seconds, 99) * 1e3,
        "max_ms": max(seconds) * 1e3,
    }


def median_time(fn: Callable[[], Any], repeats: int) -> float:
    """Median seconds of `repeats` calls of `fn`, after one untimed warm-up call (tracing and
    first-call allocations are not what a bench measures)."""
    fn()
    times = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _proc_status(pid: int) -> dict[str, str]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


def rss_bytes(pid: int) -> tuple[int, int]:
    """(current, peak) resident set size of a process in bytes, from /proc (Linux)."""
    fields = _proc_status(pid)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


def cpu_seconds(pid: int) -> float:
    """CPU seconds the process has used so far (all its threads), from /proc.

    Each live thread's `schedstat` counts nanoseconds; `stat`'s utime + stime count clock ticks
    (10 ms), which a short bench phase can round down to 0, so ticks are only the fallback
    (they also count threads that have exited, which schedstat loses)."""
    total_ns = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                total_ns += int((task / "schedstat").read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        total_ns = 0
    if total_ns:
        return total_ns / 1e9
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_split() -> tuple[set[int], set[int]] | None:
    """(all usable CPUs but the last, the last), or None with fewer than 2 CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    return (set(cpus[:-1]), {cpus[-1]}) if len(cpus) >= 2 else None


def pin(pid: int, cpus: set[int]) -> None:
    """Set the CPU affinity of every thread of a process (threads started later inherit it)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(tid), cpus)


def progress(bench: str, quiet: bool = False) -> Callable[[str], None]:
    """A function that reports a step on stderr (stdout keeps only the figures)."""

    def say(message: str) -> None:
        if not quiet:
            print(f"[bench {bench}] {message}", file=sys.stderr, flush=True)

    return say
