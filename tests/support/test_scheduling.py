"""The scheduler `make test` hands xdist (tests/support/scheduling.py), driven as xdist's
DSession drives it, with workers that record what they are sent."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from stack.drill.training import BELOW_SERVING_NICENESS
from tests.support.scheduling import (
    COMPUTING_NICENESS,
    LaneScheduling,
    cores,
    fast_workers,
    niceness,
    released,
)
from tests.support.stack import CLOCK_LANES, LANES
from tokenpulse.paths import ROOT

DRILLS = "tests/stack/test_drill.py::test_drills_pass_against_a_running_up"
COLLECTION = [
    f"{DRILLS}[restarts]",
    f"{DRILLS}[faults]",
    "tests/e2e/test_ha.py::test_a",
    "tests/e2e/test_replicas.py::test_b",
    "tests/alerts/test_e2e.py::test_c",
    *(f"tests/unit/test_m{m}.py::test_{i}" for m in range(4) for i in range(3)),
]


@dataclass(eq=False)
class Worker:
    """What xdist's scheduler sees of a worker: what it was sent, whether it was told to stop."""

    collection: list[str]
    sent: list[str] = field(default_factory=list)
    shutting_down: bool = False
    gateway: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(id="gw"))

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent += [self.collection[i] for i in indices]

    def shutdown(self) -> None:
        self.shutting_down = True


def scheduled(workers: int) -> tuple[LaneScheduling, list[Worker]]:
    config = SimpleNamespace(
        getvalue=lambda name: [f"{workers}*popen"], option=SimpleNamespace(loadscopereorder=False)
    )
    sched = LaneScheduling(config)  # type: ignore[arg-type]
    nodes = [Worker(COLLECTION) for _ in range(workers)]
    for node in nodes:
        sched.add_node(node)  # type: ignore[arg-type]
        sched.add_node_collection(node, COLLECTION)  # type: ignore[arg-type]
    sched.schedule()
    return sched, nodes


def run_all(sched: LaneScheduling, nodes: list[Worker]) -> None:
    """Complete every test each worker holds, as its reports come in, until none is left."""
    done = {id(n): 0 for n in nodes}
    while any(done[id(n)] < len(n.sent) for n in nodes):
        for node in nodes:
            if done[id(node)] < len(node.sent):
                index = COLLECTION.index(node.sent[done[id(node)]])
                done[id(node)] += 1
                sched.mark_test_complete(node, index)  # type: ignore[arg-type]


def lanes_of(node: Worker) -> set[str]:
    return {t for t in node.sent if not t.startswith("tests/unit/")}


def test_with_a_worker_per_lane_and_more_each_lane_starts_at_once_then_its_worker_helps() -> None:
    # the collection's four lanes (two drill shards, the e2e stacks, the shared stack) and two more
    sched, nodes = scheduled(4 + 2)
    run_all(sched, nodes)
    for node in nodes[:4]:  # each lane went to a worker of its own, first, whole and alone
        lane = lanes_of(node)
        assert lane and node.sent[: len(lane)] == [t for t in COLLECTION if t in lane]
        assert len({t.split("::")[0] for t in lane}) == 1 or lane == {
            "tests/e2e/test_ha.py::test_a", "tests/e2e/test_replicas.py::test_b"
        }  # fmt: skip
    for node in nodes[4:]:  # the computing workers got no lane
        assert node.sent and not lanes_of(node)
    # every test ran once; a lane's worker held at most one lane, and went on to other modules
    assert sorted(t for n in nodes for t in n.sent) == sorted(COLLECTION)
    assert any(len(n.sent) > len(lanes_of(n)) for n in nodes[:4])
    assert not sched.workqueue and sched.tests_finished


def test_with_fewer_workers_a_lane_is_one_unit_and_its_worker_takes_more() -> None:
    sched, nodes = scheduled(2)
    run_all(sched, nodes)
    assert sorted(t for n in nodes for t in n.sent) == sorted(COLLECTION)
    assert any(lanes_of(n) and len(lanes_of(n)) < len(n.sent) for n in nodes)


def test_a_lanes_stack_is_released_when_the_next_test_does_not_use_it() -> None:
    assert released(["shared_stack", "tmp_path"], ["tmp_path"]) == ["shared_stack"]
    assert released(["drill_stack"], ["drill_stack", "capsys"]) == []  # the lane goes on
    # a session fixture that is not a lane's stack (a cached export) is kept for later users
    assert released(["tiny_export", "drill_stack"], []) == ["drill_stack"]


def test_auto_counts_a_worker_per_core_and_one_per_lane() -> None:
    from tests.conftest import pytest_xdist_auto_num_workers

    assert cores() >= 1
    assert pytest_xdist_auto_num_workers(None) == cores() + len(LANES)  # type: ignore[arg-type]


def test_the_inner_loop_counts_the_cores_the_run_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    assert fast_workers() == 2 * cores() + len(CLOCK_LANES)
    # a container whose quota allows one core of its host's many: four workers (two for the core,
    # one per clocks lane), not 2 x host + 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    real_read = Path.read_text

    def cgroup(path: Path, *args: object, **kw: object) -> str:
        if str(path) == "/sys/fs/cgroup/cpu.max":
            return "100000 100000\n"
        return real_read(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", cgroup)
    assert fast_workers() == 4


def test_a_computing_worker_beside_the_lanes_yields_them_the_cpu() -> None:
    beside = len(LANES) + 2
    assert niceness("tests/unit/test_m0.py::test_0", beside) == COMPUTING_NICENESS > 0
    assert niceness(f"{DRILLS}[restarts]", beside) == 0
    assert niceness("tests/alerts/test_e2e.py::test_c", beside) == 0
    # too few workers for lanes of their own: every worker runs everything, at one priority
    assert niceness("tests/unit/test_m0.py::test_0", 2) == 0
    # and to what a drill runs below its stack (training, an export): those have clocks too
    assert COMPUTING_NICENESS > BELOW_SERVING_NICENESS


def test_a_worker_tears_a_lanes_stack_down_when_it_moves_on_and_starts_it_again_if_asked(
    tmp_path: Path,
) -> None:
    # a pytest run of its own with tests/conftest.py's hook: the stack's life as its fixture saw it
    (tmp_path / "conftest.py").write_text(
        "import pytest\n"
        "from tests.conftest import pytest_runtest_teardown  # noqa: F401\n"
        "EVENTS = []\n"
        "@pytest.fixture(scope='session')\n"
        "def drill_stack():\n"
        "    EVENTS.append('up')\n"
        "    yield 'stack'\n"
        "    EVENTS.append('down')\n"
        "@pytest.fixture\n"
        "def events():\n"
        "    return EVENTS\n"
    )
    (tmp_path / "test_lane.py").write_text(
        "def test_a(drill_stack, events): assert events == ['up']\n"
        "def test_b(drill_stack, events): assert events == ['up']\n"
        "def test_c(events): assert events == ['up', 'down']\n"
        "def test_d(drill_stack, events): assert events == ['up', 'down', 'up']\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_XDIST_WORKER", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 passed" in run.stdout
