"""How the suite's units of work reach xdist's workers: lanes first, then the cores' share.

tests/conftest.py hands xdist this scheduler (`--dist loadscope`) and, for `-n auto`, a worker
count of one per core plus one per lane (tests/support/stack.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from xdist.scheduler import LoadScopeScheduling

from tests.support.stack import CLOCK_LANES, LANE_STACK_FIXTURES, LANES, scope_of


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


def fast_workers() -> int:
    """`make test-fast`'s workers: two per core, since many of the modules left wait on a clock
    or a child between bursts, and one for each clocks lane, whose modules mostly wait. The cores
    are the ones this run may use (a cgroup's quota too, as `-n auto` counts them), not `nproc`,
    which a container with a quota still sees as all of its host's."""
    return 2 * cores() + len(CLOCK_LANES)


class LaneScheduling(LoadScopeScheduling):
    """Whole modules to a worker, a lane's modules as one unit; more work only to a worker about
    to run dry.

    The lanes lead the queue, so with a worker for each lane and more (`-n auto`) every lane
    starts at once on a worker of its own while the other workers, one per core, take the
    other modules. A lane's worker then joins them: a lane is over in a few minutes (the clocks
    lane in under three), and the modules left are many that wait (benches, model servers,
    Prometheus) between short bursts of CPU, so more workers keep the cores busy.

    xdist tops a worker up while it has two tests or fewer left; a module's last test can be a
    long one, so a module queued behind it would wait that long while other workers idle. A
    worker runs a test once it holds the next one too, so it gets more work when one test is
    left, not before.
    """

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)

    def _reschedule(self, node: Any) -> None:
        if self.workqueue and not node.shutting_down:
            if self._pending_of(self.assigned_work[node]) > 1:
                return
        super()._reschedule(node)


# How much lower a computing worker runs than the lanes (os.nice's increment). A kernel that
# shares the CPU by session first (autogroup, sched(7): on when the suite runs in the root CPU
# cgroup, as on our 2-core machine) ranks nice only inside a session: the lanes' stack components
# each run in a session of their own (stack/launch.py) and get a session's share whatever the
# workers' nice, while the xdist workers share the run's session with what the lanes' workers
# start there themselves: a drill's training run and export (stack/drill/training.py runs them
# at 10). Niceness weighs threads, not processes: at 10, seven workers' TensorFlow threads
# outweighed such an export, which then missed its 180 s bound.
COMPUTING_NICENESS = 19
# So a computing module's subprocess waits behind the lanes for as long as they want the CPU: its
# timeout bounds a hang, not a pace. In a whole `make test` on 2 cores, `bench model --preset-dir`
# (45 s alone) took 547 s, and `bench malloc` 429 s, against their 600 s bounds.
COMPUTING_TIMEOUT_S = 1800.0
# and the test around it (pytest-timeout's mark; the suite's default is 600 s): the subprocess's
# bound and the cached builds it may make first
COMPUTING_TEST_TIMEOUT_S = COMPUTING_TIMEOUT_S + 600.0


def niceness(nodeid: str, workers: int) -> int:
    """The niceness a worker runs `nodeid` at: with a worker per lane (more workers than lanes),
    a module outside the lanes yields the CPU to the lanes' stacks. Those answer on clocks
    (scrapes, `for`, group waits, restart delays) and their drills judge what pages and when; a
    computing module only takes longer when it waits. With fewer workers every worker runs
    everything at one priority."""
    if workers <= len(LANES) or scope_of(nodeid) in LANES:
        return 0
    return COMPUTING_NICENESS


def released(used: set[str] | list[str], used_next: set[str] | list[str]) -> list[str]:
    """The lane stacks (tests/support/stack.py's LANE_STACK_FIXTURES) a test used (`used`) that
    the worker's next test (`used_next`) does not: tests/conftest.py tears those down then.

    A lane's stack is session-scoped, since its modules share it, but a lane's worker goes on to
    other modules: at the end of the session the stack would have served nobody for minutes and
    taken their CPU. A later test that wants it again starts it again."""
    return sorted(set(LANE_STACK_FIXTURES) & set(used) - set(used_next))
