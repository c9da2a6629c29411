"""How the suite's units of work reach xdist's workers: lanes beside the cores.

tests/conftest.py hands xdist this scheduler (`--dist loadscope`) and, for `-n auto`, a worker
count of one per core plus one per lane (tests/support/stack.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from xdist.scheduler import LoadScopeScheduling

from tests.support.stack import LANES, scope_of


def cores() -> int:
    """The cores this process may run on: its CPU affinity, capped by a cgroup CPU quota (v2's
    cpu.max, or v1's cfs quota and period), since a container may see every core of its host."""
    n = len(os.sched_getaffinity(0))
    for files in (("cpu.max",), ("cpu/cpu.cfs_quota_us", "cpu/cpu.cfs_period_us")):
        try:
            text = " ".join(Path("/sys/fs/cgroup", f).read_text() for f in files).split()
            quota, period = int(text[0]), int(text[1])
        except (OSError, ValueError, IndexError):
            continue  # absent, or "max" (no quota)
        if quota > 0:
            return max(1, min(n, quota // period))
    return n


class LaneScheduling(LoadScopeScheduling):
    """Whole modules to a worker, a lane's modules as one unit; more work only to a worker about
    to run dry.

    With a worker for each lane and more (`-n auto`), each lane gets a worker of its own that
    runs that lane only, and the other workers, one per core, share every other module: the
    lanes wait on clocks beside them instead of holding a core's worker idle. With fewer, a lane
    is one unit among the rest and its worker takes more once it is done.

    xdist tops a worker up while it has two tests or fewer left; a module's last test can be a
    long one, so a module queued behind it would wait that long while other workers idle. A
    worker runs a test once it holds the next one too, so it gets more work when one test is
    left, not before.
    """

    beside: bool | None = None  # lanes on workers of their own: decided on the first assignment

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)

    def _assign_work_unit(self, node: Any) -> None:
        if self.beside is None:
            queued = sum(scope in LANES for scope in self.workqueue)
            self.beside = 0 < queued < len(self.nodes)
        lane = next(iter(self.workqueue)) in LANES
        super()._assign_work_unit(node)
        if lane and self.beside:
            node.shutdown()  # runs what it holds, then stops: the lane is all it runs

    def _reschedule(self, node: Any) -> None:
        if self.workqueue and not node.shutting_down:
            if self._pending_of(self.assigned_work[node]) > 1:
                return
        super()._reschedule(node)


# how much lower a computing worker runs than the lanes' stacks (os.nice's increment)
COMPUTING_NICENESS = 10


def niceness(first_nodeid: str, workers: int) -> int:
    """The increment for a worker whose first test is `first_nodeid`: with lanes beside the cores,
    a worker that computes yields the CPU to the lanes' stacks. Those answer on clocks (scrapes,
    `for`, group waits, restart delays) and their drills judge what pages and when; a computing
    worker only takes longer when it waits. With fewer workers every worker runs everything."""
    if workers <= len(LANES) or scope_of(first_nodeid) in LANES:
        return 0
    return COMPUTING_NICENESS
