"""`tokenpulse drill` against a real `tokenpulse up` (compressed rules, fault proxy, fast polls).

The scenarios are split in two shards (tests/support/stack.py's DRILL_SHARDS), each drilled on a
drill stack of its own (tests/stack/conftest.py) in an xdist lane of its own, so the two run at
once; the restarts shard's stack is shared with the soak test. A shard's scenarios run in one
`drill` call, as `tokenpulse drill <a>,<b>` would, and each must pass: the expected alert on its
route in time, nothing else paging, resolved once the fault is gone. The stack state file is
tested on its own first (fast, no stack); the target's check comes last in its lane, after the
drills, so that no other module waits behind them on the same worker.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from monitoring.mixin.dashboards.queries import panel_queries, substitute
from stack import drill
from stack.cli import main as cli_main
from stack.config import Ports, StackConfig
from stack.drill.target import Target
from stack.drill.training import TrainingWorkerKilled
from stack.up.state import NoRunningStack, StackState, read_state, remove_state, write_state
from tests.e2e.upstack import UpStack
from tests.support.binaries import needs_prometheus
from tests.support.stack import DRILL_SHARDS, shard_scenarios
from tokenpulse.paths import DASHBOARDS

# The suite drills every scenario, in `drill all`'s order (~13 min one after the other, ~7 min
# per shard), but ha-monitoring-failover, which needs `up --ha` (tests/e2e/test_ha.py drills it)
SUITE_SCENARIOS = tuple(name for name in drill.SCENARIOS if name != "ha-monitoring-failover")


def _state(run_dir: Path, up_pid: int) -> StackState:
    config = StackConfig(
        run_dir=run_dir, ports=Ports(gateway_port=1), rules="compressed", restart_delay_s=30,
        group_wait="10s", group_interval="3s", evaluation_interval="1s",
    )  # fmt: skip
    return StackState(config, up_pid, {"gateway": 2})


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


def test_the_shards_drill_every_scenario_once() -> None:
    drilled = [name for shard in DRILL_SHARDS for name in shard_scenarios(shard, SUITE_SCENARIOS)]
    assert sorted(drilled) == sorted(SUITE_SCENARIOS)
    named = [name for names in DRILL_SHARDS.values() for name in names]
    assert set(named) <= set(SUITE_SCENARIOS), "a shard names a scenario the suite does not drill"
    assert all(shard_scenarios(shard, SUITE_SCENARIOS) for shard in DRILL_SHARDS)


@pytest.mark.slow
@pytest.mark.timeout(900)  # a shard's drills, one after the other: ~7 min, twice that when busy
@needs_prometheus
@pytest.mark.parametrize("shard", DRILL_SHARDS)
def test_drills_pass_against_a_running_up(drill_stack: UpStack, tmp_path: Path, shard: str) -> None:
    scenarios = shard_scenarios(shard, SUITE_SCENARIOS)
    report = tmp_path / "drill-report.json"
    settings = drill.DrillSettings(
        scenario=",".join(scenarios), run_dir=drill_stack.run_dir, report=report
    )
    code = drill.run(settings)
    doc = json.loads(report.read_text())
    failed = {s["name"]: s["problems"] + s["unexpected_pages"] for s in doc["scenarios"]
              if not s["passed"]}  # fmt: skip
    assert failed == {} and code == 0
    assert [s["name"] for s in doc["scenarios"]] == list(scenarios)
    for s in doc["scenarios"]:
        for page in s["expected"]:
            assert page["fired_after_s"] is not None and page["resolved_after_s"] is not None
    trained = [s for s in doc["scenarios"] if s["name"] == TrainingWorkerKilled.name]
    if trained:  # a run the stack scraped: the training dashboard drawn over it
        _training_dashboard_was_filled(Target(drill_stack.run_dir), trained[0]["took_s"])


def _training_dashboard_was_filled(target: Target, took_s: float) -> None:
    """Every panel of the training dashboard draws something over the drill's run (its
    workers' series are stale now, so over the range, as Grafana draws it)."""
    model = json.loads((DASHBOARDS / "tokenpulse-training.json").read_text())
    queries = list(panel_queries(model))
    assert len(queries) >= 8
    end = time.time()
    empty = [
        f"{q.panel} / {q.legend}"
        for q in queries
        if not target.query_range(substitute(q.expr, "15s"), end - took_s - 30, end, "2s")
    ]
    assert empty == []


@pytest.mark.slow
@needs_prometheus
def test_target_reads_what_up_wrote(drill_stack: UpStack) -> None:
    target = Target(drill_stack.run_dir)
    wanted = {"modelserver", "faultproxy", "gateway", "prometheus", "esfaultproxy", "shipper"}
    assert set(target.state.pids) >= wanted
    assert target.state.config.es_url and target.state.config.es_fault_proxy_port
    assert (
        target.state.pids["gateway"] == drill_stack.pids()["gateway"]
        or "gateway" in target.state.pids
    )
    assert target.generate() == 200
