"""The GPU drill's fault: a file the fake backend accepts, growing XIDs, cleared afterwards."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from exporter.nvml.fake_faults import parse_faults
from stack.config import StackConfig
from stack.drill.gpu import THROTTLED_GPU, XID, XID_GPU, GpuXidAndThrottle
from stack.drill.scenario import Log
from stack.drill.target import DrillError, Target
from stack.up.state import StackState, write_state


def _target(run_dir: Path, fake_gpus: bool = True) -> Target:
    """A stack whose fake GPUs read RUN_DIR/gpu-faults.json (none: it runs no GPUs)."""
    config = StackConfig(
        run_dir=run_dir, rules="compressed", restart_delay_s=20,
        gpu_backend="fake" if fake_gpus else "off",
    )  # fmt: skip
    write_state(StackState(config, os.getpid(), {}))
    (run_dir / "demo-key.txt").write_text("key\n")
    return Target(run_dir)


def test_the_fault_file_is_one_the_fake_gpus_accept_and_is_cleared(tmp_path: Path) -> None:
    path = tmp_path / "gpu-faults.json"
    target = _target(tmp_path)
    scenario = GpuXidAndThrottle()
    scenario.xid_every_s = 0.05
    log = Log()
    with scenario.fault(target, log):
        first = parse_faults(path.read_text(), n_gpus=2)
        # at least the XID written on entry; a busy host may let the 50 ms repeat add more
        assert first.xids and {(x.gpu, x.xid) for x in first.xids} == {(XID_GPU, XID)}
        assert first.thermal_throttle == [THROTTLED_GPU]
        time.sleep(0.5)
        later = parse_faults(path.read_text(), n_gpus=2)
    ids = [x.id for x in later.xids]
    assert len(ids) >= 3 and len(set(ids)) == len(ids)  # the GPU keeps reporting, new ids
    assert json.loads(path.read_text()) == {}  # faults cleared: no throttle, no new XID
    assert not list(tmp_path.glob(".*.tmp"))
    assert "faults_cleared" in log.timings


def test_a_stack_without_fake_gpus_is_refused_with_what_to_do(tmp_path: Path) -> None:
    target = _target(tmp_path, fake_gpus=False)
    with pytest.raises(DrillError, match="start up with --gpu-backend fake"):
        with GpuXidAndThrottle().fault(target, Log()):
            pass


def test_a_page_naming_another_gpu_is_a_problem(tmp_path: Path) -> None:
    target = _target(tmp_path)
    # fixed instants: the page 5 s after the drill started (no clock read, so none can disagree)
    log = Log(started=1_796_000_000.0)
    now = "2026-11-30T00:53:25+00:00"  # 1_796_000_005
    alerts = [
        {"status": "firing", "labels": {"alertname": "TokenPulseGpuCriticalXid", "gpu": "1",
                                        "xid": str(XID)}},
        {"status": "firing", "labels": {"alertname": "TokenPulseGpuThrottled",
                                        "gpu": str(THROTTLED_GPU)}},
    ]  # fmt: skip
    line = {"received_at": now, "receiver": "pager", "alerts": alerts}
    (tmp_path / "oncall.jsonl").write_text(json.dumps(line) + "\n")
    GpuXidAndThrottle().check(target, log)
    assert log.problems == [
        "TokenPulseGpuCriticalXid names {'gpu': '1', 'xid': '48'}, not the faulty GPU "
        "{'gpu': '0', 'xid': '48'}"
    ]
