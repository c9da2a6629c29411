"""What a run cost the machine, printed after its slowest tests: the busy CPU-seconds of every
process on it, and how fast this host ran a fixed piece of Python at the start.

The suite is CPU-bound on a small machine, so its wall time is about its CPU divided by the
cores; and the same work takes more or fewer CPU-seconds as a shared host's speed varies. The two
figures together tell a suite that grew from a host that slowed down."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

STAT = Path("/proc/stat")
REFERENCE_ADDITIONS = 5_000_000


def busy_cpu_s(stat: Path = STAT) -> float | None:
    """CPU-seconds every core has spent busy since boot (user, nice, system, irq, softirq,
    steal), from /proc/stat's first line; None where the file is missing or unreadable."""
    try:
        first = stat.read_text().splitlines()[0].split()
        if first[:1] != ["cpu"]:
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in first[1:9])
    except (OSError, IndexError, ValueError):
        return None
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def reference_loop_s(tries: int = 3) -> float:
    """CPU-seconds this process takes for REFERENCE_ADDITIONS additions in a Python loop: the
    fastest of `tries`, the host's speed with the least of what else ran on it."""
    times = []
    for _ in range(tries):
        start = time.process_time()
        total = 0
        for i in range(REFERENCE_ADDITIONS):
            total += i
        times.append(time.process_time() - start)
    assert total == REFERENCE_ADDITIONS * (REFERENCE_ADDITIONS - 1) // 2
    return min(times)


@dataclass(frozen=True)
class RunCost:
    """The machine's counters when a run started."""

    busy_s: float | None
    wall: float
    reference_s: float

    @classmethod
    def start(cls) -> RunCost:
        reference = reference_loop_s()  # before the counters: the loop is not the run's cost
        return cls(busy_cpu_s(), time.monotonic(), reference)

    def line(self, cores: int) -> str:
        """One line: the busy CPU-seconds since start, the wall time, the cores they kept busy."""
        wall = time.monotonic() - self.wall
        reference = (
            f"this host ran the reference loop ({REFERENCE_ADDITIONS:,} Python additions) in "
            f"{self.reference_s:.2f} CPU-s"
        )
        now = busy_cpu_s()
        if self.busy_s is None or now is None:
            return f"run cost: {wall:,.0f} s wall; {reference}"
        busy = now - self.busy_s
        return (
            f"run cost: {busy:,.0f} CPU-s busy on this machine over {wall:,.0f} s wall, "
            f"{busy / max(wall, 1e-9):.2f} of the {cores} cores the run may use; {reference}"
        )
