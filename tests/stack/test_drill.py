"""`tokenpulse drill` against a real `tokenpulse up` (compressed rules, fault proxy, fast polls).

The drill stack (tests/stack/conftest.py) is shared with the soak test. Scenarios run in one
`drill` call, as `tokenpulse drill <a>,<b>` would, and each must pass: the expected alert on
its route in time, nothing else paging, resolved once the fault is gone. The fault proxy and the
stack state file are tested on their own first (fast, no stack).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stack import drill
from stack.cli import main as cli_main
from stack.drill.target import Target
from stack.up.state import NoRunningStack, StackState, read_state, remove_state, write_state
from tests.e2e.upstack import UpStack
from tests.support.binaries import needs_prometheus

# The suite drills every scenario, in `drill all`'s order (~10 min against one up)
# but ha-monitoring-failover, which needs `up --ha` (tests/e2e/test_ha.py drills it there)
SUITE_SCENARIOS = tuple(name for name in drill.SCENARIOS if name != "ha-monitoring-failover")


def _state(run_dir: Path, up_pid: int) -> StackState:
    return StackState(
        run_dir=str(run_dir), up_pid=up_pid, ports={"gateway_port": 1}, pids={"gateway": 2},
        rules="compressed", restart_delay_s=30, models_dir="m", model="gen", group_wait="10s",
        group_interval="3s", evaluation_interval="1s",
    )  # fmt: skip


def test_stack_state_round_trips_and_a_gone_stack_is_named(tmp_path: Path) -> None:
    import os

    with pytest.raises(NoRunningStack, match="no running stack in .* start one with"):
        read_state(tmp_path)
    write_state(_state(tmp_path, os.getpid()))
    assert read_state(tmp_path) == _state(tmp_path, os.getpid())
    assert (tmp_path / "stack.json").stat().st_mode & 0o777 == 0o600
    remove_state(tmp_path, os.getpid() + 1)  # another up's stop leaves this one's file
    assert read_state(tmp_path).up_pid == os.getpid()
    remove_state(tmp_path, os.getpid())
    assert not (tmp_path / "stack.json").exists()
    write_state(_state(tmp_path, 2**22 + 12345))  # no such pid
    with pytest.raises(NoRunningStack, match="is gone"):
        read_state(tmp_path)


def test_drill_refuses_an_unknown_scenario_and_a_missing_stack(tmp_path, capsys) -> None:
    assert cli_main(["drill", "no-such-thing"]) == 2
    assert (
        "unknown scenario no-such-thing; known: all, model-server-killed" in capsys.readouterr().err
    )
    assert cli_main(["drill", "error-burst", f"--run-dir={tmp_path}"]) == 2
    assert "no running stack in" in capsys.readouterr().out


@pytest.mark.slow
@needs_prometheus
def test_target_reads_what_up_wrote(drill_stack: UpStack) -> None:
    target = Target(drill_stack.run_dir)
    wanted = {"modelserver", "faultproxy", "gateway", "prometheus", "esfaultproxy", "shipper"}
    assert set(target.state.pids) >= wanted
    assert target.state.es_url and target.state.es_fault_proxy_port
    assert (
        target.state.pids["gateway"] == drill_stack.pids()["gateway"]
        or "gateway" in target.state.pids
    )
    assert target.generate() == 200


@pytest.mark.slow
@pytest.mark.timeout(1200)  # every drill, one after the other: ~10 min, twice that on a busy box
@needs_prometheus
def test_drills_pass_against_a_running_up(drill_stack: UpStack, tmp_path: Path) -> None:
    report = tmp_path / "drill-report.json"
    settings = drill.DrillSettings(
        scenario=",".join(SUITE_SCENARIOS), run_dir=drill_stack.run_dir, report=report
    )
    code = drill.run(settings)
    doc = json.loads(report.read_text())
    failed = {s["name"]: s["problems"] + s["unexpected_pages"] for s in doc["scenarios"]
              if not s["passed"]}  # fmt: skip
    assert failed == {} and code == 0
    assert [s["name"] for s in doc["scenarios"]] == list(SUITE_SCENARIOS)
    for s in doc["scenarios"]:
        for page in s["expected"]:
            assert page["fired_after_s"] is not None and page["resolved_after_s"] is not None
