"""How `make test` lays the suite out on its xdist workers: the stack lanes and the drill shards.

A running stack mostly waits on clocks (scrape and evaluation intervals, `for`, group waits,
restart delays), so each stack gets a worker of its own, a *lane*, and the tests that do not
start one run on the other workers meanwhile (tests/conftest.py's `LaneScheduling`). A lane is one
unit of work: its modules run on one worker, one after the other, in file order, so a stack that
several modules share starts once. The grouping is by node id: pytest 9 keeps a node's id
structured, so xdist's own `xdist_group` suffix never reaches the scheduler. Collection fails for
a module that uses `shared_stack` without being in its lane.
"""

from __future__ import annotations

SHARED_STACK = "shared-stack"
SHARED_STACK_MODULES = (
    "tests/alerts/test_e2e.py",  # first: its "healthy stack notifies nobody" wants a quiet stack
    "tests/monitoring/mixin/dashboards/test_live.py",
    "tests/alerts/test_runbook_commands.py",  # puts labels, weight and silences back after
)

# The drill scenarios (~13 min one after the other) run on two drill stacks at once, in two lanes
# of ~7 min: the scenarios that kill or break the model server on one, every other fault on the
# other. `faults` takes the scenarios no shard names, so a new scenario is drilled there.
DRILL_SHARDS: dict[str, tuple[str, ...]] = {
    "restarts": (
        "model-server-killed", "crash-loop", "restart-no-available-version", "crash-loop-slow",
        "failure-after-restart", "training-worker-killed",
    ),
    "faults": (),
}  # fmt: skip
DRILL_MODULE = "tests/stack/test_drill.py"
DRILL_STACK = "drill-stack-{}"
# the soak (~30 s on the drill stack's flags) evens the restarts lane out against the faults one
SOAK_MODULE = "tests/stack/test_soak.py"
DRILL_LANES = {
    SOAK_MODULE: DRILL_STACK.format("restarts"),
    DRILL_MODULE: DRILL_STACK.format("faults"),  # its checks without a shard: the target's
}

# Stacks of their own flags (`up --ha`, the degraded canary, two replicas): one after the other in
# one lane, as long as a drill lane.
E2E_STACKS = "e2e-stacks"
E2E_STACK_MODULES = (
    "tests/e2e/test_ha.py",
    "tests/e2e/test_up_stack.py",
    "tests/e2e/test_replicas.py",
)

# Modules that judge how real processes keep time (a dead man's switch's bound, a rollout's config
# polls, a drain's deadline, a proxy's cut, a load test's pacing, Alertmanager's inhibitor given
# its settling second per case): lanes, so they run beside the computing workers at the lanes'
# priority (tests/support/scheduling.py), not starved by them. They wait far more than they
# compute (the Alertmanager modules: 34 s for 0.7 CPU-s), so on a computing worker they left cores
# idle: in `make test-fast` the two inhibition modules and the shipper's, waiting on three of the
# four workers at once, held the 2 cores 55 % busy for 40 s. Two lanes, not one: one after the
# other they took 160 s on an idle machine (what `make test-fast` excludes left out), which bound
# `make test-fast` (178 s, 1.74 of 2 cores busy); split by their measured durations (deadman 40 s,
# the inhibitions 25, engine 9, probes and proxy 5 each; the Alertmanager watchdog 34, the
# shipper's root 18, find-max 12, the inhibition scenarios 8, drain 5), each takes about 80 s.
CLOCK_LANES: dict[str, tuple[str, ...]] = {
    "clocks-1": (
        "tests/stack/test_rollout.py",
        "tests/monitoring/oncall/test_deadman.py",
        "tests/monitoring/mixin/test_inhibitions.py",
        "tests/stack/loadtest/test_engine.py",
        "tests/serving/gateway/test_probes.py",
        "tests/stack/drill/test_proxy.py",
    ),
    "clocks-2": (
        "tests/monitoring/oncall/test_watchdog_alertmanager.py",
        "tests/log_pipeline/test_shipper_root.py",
        "tests/stack/loadtest/test_findmax_standin.py",
        "tests/alerts/test_scenarios_inhibition.py",
        "tests/serving/gateway/test_drain.py",
    ),
}
CLOCK_MODULES = tuple(module for modules in CLOCK_LANES.values() for module in modules)
_CLOCK_LANE_OF = {module: lane for lane, modules in CLOCK_LANES.items() for module in modules}

# Modules that share one session fixture (a model server, a loaded model): one unit of work each,
# so that one worker runs them and sets it up once (xdist gives a session fixture to every worker
# that asks: spread over workers, the model server modules started 3 and 3, at ~8 CPU-s a start).
# Not lanes: they compute between their calls, so they run on the computing workers like any
# module. Collection fails for a module that uses the fixture without being in its unit.
SHARED_FIXTURE_UNITS: dict[str, tuple[str, ...]] = {
    # tests/serving/modelserver/conftest.py's `server`
    "modelserver-server": (
        "tests/serving/modelserver/test_continue.py",
        "tests/serving/modelserver/test_grpc.py",
        "tests/serving/modelserver/test_metrics_contract.py",
        "tests/serving/modelserver/test_rest.py",
    ),
    # tests/serving/gateway/conftest.py's `tiny_gen`
    "gateway-e2e": (
        "tests/serving/gateway/test_e2e.py",
        "tests/serving/gateway/test_openapi.py",
        "tests/serving/gateway/test_streaming_e2e.py",
    ),
    # tests/serving/model/conftest.py's `tiny_loaded`: the export loaded in the worker (a load
    # and each signature's first call: ~2.3 CPU-s)
    "tiny-loaded": (
        "tests/serving/model/test_continuation.py",
        "tests/serving/model/test_export.py",
        "tests/serving/model/test_generate.py",
        "tests/serving/model/test_stops.py",
    ),
    # tests/serving/model/hub/conftest.py's `hub_lm`: keras_hub's own model of each preset
    "keras-hub": (
        "tests/serving/model/hub/test_bpe.py",
        "tests/serving/model/hub/test_importer.py",
    ),
}
# the fixture each unit (and the shared stack's lane) shares: (its name, the folder whose conftest
# defines it)
SHARED_FIXTURES = {
    SHARED_STACK: ("shared_stack", "tests"),
    "modelserver-server": ("server", "tests/serving/modelserver"),
    "gateway-e2e": ("tiny_gen", "tests/serving/gateway"),
    "tiny-loaded": ("tiny_loaded", "tests/serving/model"),
    "keras-hub": ("hub_lm", "tests/serving/model/hub"),
}
_UNIT_OF = {module: unit for unit, modules in SHARED_FIXTURE_UNITS.items() for module in modules}

# Modules that judge a healthy stack's silence run first in their lane, on a stack nothing has
# broken yet: an incident's load (the restarts shard trains and exports beside the traffic) stays
# in the latency SLO's windows after its alerts resolve, and a burn it left paged in the soak.
QUIET_FIRST = (SOAK_MODULE, SHARED_STACK_MODULES[0])

# The session fixtures that start a lane's stack: torn down once a worker's next test does not use
# them (tests/support/scheduling.py's `released`)
LANE_STACK_FIXTURES = ("shared_stack", "drill_stack")

# The lanes, longest first: xdist hands units out in this order, so every lane starts at once.
LANES = (
    DRILL_STACK.format("restarts"), DRILL_STACK.format("faults"), E2E_STACKS, SHARED_STACK,
    *CLOCK_LANES,
)  # fmt: skip


def drill_shard(nodeid: str) -> str | None:
    """The drill shard a node id runs (its parameter), or None."""
    module, _, name = nodeid.partition("::")
    if module != DRILL_MODULE or not name.endswith("]"):
        return None
    shard = name.rsplit("[", 1)[-1][:-1]
    return shard if shard in DRILL_SHARDS else None


def shard_scenarios(shard: str, suite: tuple[str, ...]) -> tuple[str, ...]:
    """The scenarios of `suite` that `shard` drills, in the suite's order."""
    named = {name for names in DRILL_SHARDS.values() for name in names}
    mine = DRILL_SHARDS[shard]
    return tuple(n for n in suite if (n in mine if mine else n not in named))


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its lane, its shared server's unit, or else its
    module."""
    module = nodeid.split("::", 1)[0]
    shard = drill_shard(nodeid)
    if shard is not None:
        return DRILL_STACK.format(shard)
    if module in DRILL_LANES:
        return DRILL_LANES[module]
    if module in E2E_STACK_MODULES:
        return E2E_STACKS
    if module in _CLOCK_LANE_OF:
        return _CLOCK_LANE_OF[module]
    if module in SHARED_STACK_MODULES:
        return SHARED_STACK
    return _UNIT_OF.get(module, module)


def run_order(nodeid: str, stacked: set[str]) -> tuple[int, bool]:
    """A test's rank in the collection (a stable sort keeps each module's order): the lanes first,
    longest first, and within a lane the modules that want a quiet stack; then the other units
    that start a stack (`stacked`: they wait on clocks too); then the rest."""
    scope = scope_of(nodeid)
    if scope in LANES:
        return LANES.index(scope), nodeid.split("::", 1)[0] not in QUIET_FIRST
    return len(LANES) + (scope not in stacked), False
