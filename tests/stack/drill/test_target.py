"""The drill target's process handling, against real child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from stack.config import StackConfig
from stack.drill.target import DrillError, Target
from stack.up.state import StackState, write_state


def _state(run_dir: Path, pids: dict[str, int]) -> Target:
    config = StackConfig(run_dir=run_dir, rules="compressed", restart_delay_s=20)
    state = StackState(config, os.getpid(), pids)
    write_state(state)
    (run_dir / "demo-key.txt").write_text("key\n")
    return Target(run_dir)


def _stopped(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "T":
            return True
        time.sleep(0.05)
    return False


def test_signal_every_reaches_each_instance_of_a_component_and_no_other(tmp_path: Path) -> None:
    procs = {
        n: subprocess.Popen(["sleep", "30"]) for n in ("prometheus", "prometheus-2", "alertmanager")
    }
    try:
        target = _state(tmp_path, {n: p.pid for n, p in procs.items()})
        pids = target.signal_every("prometheus", signal.SIGSTOP)
        assert sorted(pids) == sorted([procs["prometheus"].pid, procs["prometheus-2"].pid])
        assert all(_stopped(pid) for pid in pids)
        assert not _stopped_now(procs["alertmanager"].pid)
        with pytest.raises(DrillError, match="no component 'grafana'"):
            target.signal_every("grafana", signal.SIGSTOP)
    finally:
        for p in procs.values():
            p.kill()
            p.wait()


def _stopped_now(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "T"
