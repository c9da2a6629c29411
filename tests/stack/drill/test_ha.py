"""ha-monitoring-failover without a stack: which stacks it runs on, and how `drill` says it will
not. The drill itself runs against `up --ha` in tests/e2e/test_ha.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stack import drill
from stack.cli import main as cli_main
from stack.config import HaPorts, Ports, StackConfig
from stack.drill.ha import HaMonitoringFailover, NotHa, applicable
from stack.drill.outages import ModelServerKilled
from stack.drill.scenario import Log
from stack.drill.target import Target
from stack.up.state import StackState, write_state

NAME = HaMonitoringFailover.name


def _state(run_dir: Path, ha: bool) -> StackState:
    (run_dir / "demo-key.txt").write_text("k\n")
    config = StackConfig(
        run_dir=run_dir, ports=Ports(prometheus_port=1), rules="compressed", restart_delay_s=20,
        group_wait="5s", group_interval="4s", ha=HaPorts() if ha else None,
    )  # fmt: skip
    state = StackState(config, os.getpid(), {})
    write_state(state)
    return state


def test_it_is_registered_last_after_the_monitoring_drills() -> None:
    assert list(drill.SCENARIOS)[-1] == NAME


def test_with_others_it_is_skipped_on_a_stack_without_ha_and_says_so(tmp_path: Path) -> None:
    scenarios = [ModelServerKilled(), HaMonitoringFailover()]
    kept, line = applicable(scenarios, _state(tmp_path, ha=False))
    assert [s.name for s in kept] == [ModelServerKilled.name]
    assert line == f"skipping {NAME}: the stack was not started with --ha"
    kept, line = applicable(scenarios, _state(tmp_path, ha=True))
    assert kept == scenarios and line is None
    kept, line = applicable(scenarios[:1], _state(tmp_path, ha=False))
    assert kept == scenarios[:1] and line is None


def test_drill_all_on_a_stack_without_ha_prints_the_skip(tmp_path, capsys, monkeypatch) -> None:
    _state(tmp_path, ha=False)
    ran: list[list[str]] = []
    monkeypatch.setattr(drill, "run_all", lambda target, scenarios, say: ran.append(
        [s.name for s in scenarios]) or [])  # fmt: skip
    assert cli_main(["drill", "all", f"--run-dir={tmp_path}",
                     f"--report={tmp_path / 'r.json'}"]) == 0  # fmt: skip
    assert ran == [[n for n in drill.SCENARIOS if n != NAME]]
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"tokenpulse drill: note: skipping {NAME}: the stack was not started with --ha"


def test_naming_it_on_a_stack_without_ha_refuses_in_one_line(tmp_path, capsys) -> None:
    _state(tmp_path, ha=False)
    report = f"--report={tmp_path / 'r.json'}"
    assert cli_main(["drill", NAME, f"--run-dir={tmp_path}", report]) == 2
    (line,) = capsys.readouterr().out.splitlines()
    assert line == (
        f"tokenpulse drill: error: {NAME} needs a stack started with `tokenpulse up --ha` (two "
        f"Prometheus, two Alertmanagers); {tmp_path} runs one of each"
    )
    assert not (tmp_path / "r.json").exists()  # nothing ran


def test_its_fault_refuses_a_stack_without_ha_before_touching_anything(tmp_path: Path) -> None:
    _state(tmp_path, ha=False)
    with pytest.raises(NotHa, match="needs a stack started with"):
        with HaMonitoringFailover().fault(Target(tmp_path), Log()):
            pass
