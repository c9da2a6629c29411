"""The lanes `make test` lays the suite out in (tests/support/stack.py)."""

from __future__ import annotations

from tests.support.stack import (
    CLOCK_LANES,
    CLOCK_MODULES,
    DRILL_SHARDS,
    E2E_STACK_MODULES,
    E2E_STACKS,
    LANES,
    SHARED_FIXTURE_UNITS,
    SHARED_FIXTURES,
    SHARED_STACK,
    SHARED_STACK_MODULES,
    run_order,
    scope_of,
    shard_scenarios,
)
from tokenpulse.paths import ROOT

DRILLS = "tests/stack/test_drill.py::test_drills_pass_against_a_running_up"


def test_each_drill_shard_is_a_lane_of_its_own_and_the_soak_joins_the_restarts_one() -> None:
    lanes = {scope_of(f"{DRILLS}[{shard}]") for shard in DRILL_SHARDS}
    assert len(lanes) == len(DRILL_SHARDS) and lanes <= set(LANES)
    assert scope_of("tests/stack/test_soak.py::test_x") == scope_of(f"{DRILLS}[restarts]")
    # the drill module's other checks run in the faults lane, after its drills (file order)
    assert scope_of("tests/stack/test_drill.py::test_target_reads_what_up_wrote") == scope_of(
        f"{DRILLS}[faults]"
    )
    assert scope_of(f"{DRILLS}[no-such-shard]") == scope_of("tests/stack/test_drill.py")


def test_the_other_stacks_have_their_lanes_and_the_rest_are_modules() -> None:
    assert {scope_of(f"{m}::t") for m in SHARED_STACK_MODULES} == {SHARED_STACK}
    assert {scope_of(f"{m}::t") for m in E2E_STACK_MODULES} == {E2E_STACKS}
    for lane, modules in CLOCK_LANES.items():
        assert {scope_of(f"{m}::t") for m in modules} == {lane}
    assert len(set(CLOCK_MODULES)) == len(CLOCK_MODULES) and set(CLOCK_LANES) <= set(LANES)
    assert scope_of("tests/alerts/test_promtool.py::t[x]") == "tests/alerts/test_promtool.py"
    assert len(set(LANES)) == len(LANES)


def test_every_module_a_lane_names_exists() -> None:
    for module in (*SHARED_STACK_MODULES, *E2E_STACK_MODULES, *CLOCK_MODULES,
                   "tests/stack/test_soak.py"):  # fmt: skip
        assert (ROOT / module).is_file(), module
    assert (ROOT / "tests/stack/test_drill.py").is_file()


def test_a_shard_without_names_takes_every_scenario_no_shard_names() -> None:
    suite = ("a", "model-server-killed", "b", "crash-loop")
    assert shard_scenarios("restarts", suite) == ("model-server-killed", "crash-loop")
    assert shard_scenarios("faults", suite) == ("a", "b")


def test_the_soak_runs_before_the_restarts_drills_on_their_stack_and_lanes_go_first() -> None:
    # the restarts shard's last scenario trains beside the traffic; the latency burn it leaves
    # in the windows paged in a soak that ran after it
    collected = [
        "tests/alerts/test_promtool.py::t[x]",
        f"{DRILLS}[restarts]",
        "tests/stack/test_soak.py::test_a_short_soak_pages_nobody_and_reports_rss",
        "tests/e2e/test_ha.py::t",
        "tests/stack/test_up_like.py::t",
        f"{DRILLS}[faults]",
    ]
    stacked = {"tests/stack/test_up_like.py"}
    ordered = sorted(collected, key=lambda nodeid: run_order(nodeid, stacked))
    assert ordered == [
        "tests/stack/test_soak.py::test_a_short_soak_pages_nobody_and_reports_rss",
        f"{DRILLS}[restarts]",
        f"{DRILLS}[faults]",
        "tests/e2e/test_ha.py::t",
        "tests/stack/test_up_like.py::t",
        "tests/alerts/test_promtool.py::t[x]",
    ]


def test_modules_sharing_a_session_fixture_are_one_unit_each() -> None:
    assert set(SHARED_FIXTURES) == {*SHARED_FIXTURE_UNITS, SHARED_STACK}
    for unit, modules in SHARED_FIXTURE_UNITS.items():
        assert {scope_of(f"{m}::t[x]") for m in modules} == {unit}
        assert unit not in LANES
        name, folder = SHARED_FIXTURES[unit]
        assert all(m.startswith(f"{folder}/") and (ROOT / m).is_file() for m in modules)
        assert f"def {name}(" in (ROOT / folder / "conftest.py").read_text()
