"""Shared fixtures: exported tiny models (built once, cached by model-code revision), and the one
alerting test stack that the modules which only watch a stack share.

Under pytest-xdist (`make test` runs `-n auto --dist loadscope`), tests.support.stack's lanes lay
the suite out: each lane (the drill shards, the e2e stacks, the shared alerting stack, the clock
modules) starts first on a worker of its own, while a worker per core takes whole modules at a
lower CPU priority; a lane's worker then tears its stack down and joins them
(tests.support.scheduling).
Collection marks every test `stack` or `training` from what it and its fixtures call
(tests.support.markers), which `make test-fast` deselects.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.stack import Stack, running_stack
from serving.model.supervisor import xla_flags
from stack import allocator, zygote
from stack.launch import launch_env
from tests.support import markers, tfsetup
from tests.support.modelserver import MODELSERVER_TEST_ENV
from tests.support.runcost import RunCost
from tests.support.scheduling import LaneScheduling, cores, niceness, released
from tests.support.stack import LANES, SHARED_FIXTURES, run_order, scope_of
from tokenpulse import logging as tp_logging

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# promtool, amtool, Prometheus and Alertmanager are Go, and CPU is what the suite runs short of:
# at GOGC=400 promtool spends a quarter less CPU on the rule tests (README, "Development").
os.environ.setdefault("GOGC", "400")
# every model server the suite starts runs without Grappler's rewrites (tests.support.modelserver)
os.environ.update(MODELSERVER_TEST_ENV)


_zygotes: list[zygote.Zygote] = []
_xla_cache: list[Path] = []
_cost: list[RunCost] = []


def pytest_configure(config: pytest.Config) -> None:
    """The run's zygotes (stack/zygote.py), one of each kind, which every process that launches
    a component reaches: the workers, the `up`s, the benches. Each would otherwise start its
    own, importing TensorFlow again. Every process the run starts preloads tcmalloc."""
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    _cost.append(RunCost.start())  # before anything of the run starts
    # Every process of the run that compiles a jit_compile function reads the run's XLA cache
    # first, as `model train`'s workers share theirs (serving.model.supervisor.xla_flags); the
    # workers and zygotes inherit it. The tiny preset's training step took 10.8 CPU-s to compile
    # and 1.8 to load, and every build, trainer and bench of the suite that trains it compiles it.
    # The cache is the run's own: TensorFlow fails, rather than compiles, on an entry it cannot
    # read, so a damaged entry in a cache kept across runs would fail every later run.
    folder = Path(tempfile.mkdtemp(prefix="tp-xla-"))
    given = os.environ.get("TF_XLA_FLAGS", "")
    if (flags := xla_flags(given, folder)) != given:
        os.environ["TF_XLA_FLAGS"] = flags
        _xla_cache.append(folder)
    else:  # the flags name a cache already
        folder.rmdir()
    # the workers start after this, on tcmalloc as the components they launch (stack/allocator.py)
    os.environ.update(allocator.with_tcmalloc(os.environ))
    if not zygote.settings().enabled or zygote.settings().sockets is not None:
        return
    folder = Path(tempfile.mkdtemp(prefix="tp-zygote-"))  # 0700: only this user may fork there
    for kind in zygote.KINDS:
        path = zygote.socket_path(folder, kind)
        _zygotes.append(zygote.Zygote(launch_env(), kind, path, wait=False))
    os.environ[zygote.SOCKETS_VARIABLE] = str(folder)


def pytest_unconfigure(config: pytest.Config) -> None:
    for forker in _zygotes:
        forker.close()
    if _zygotes:
        shutil.rmtree(os.environ.pop(zygote.SOCKETS_VARIABLE), ignore_errors=True)
    _zygotes.clear()
    for folder in _xla_cache:
        shutil.rmtree(folder, ignore_errors=True)
    _xla_cache.clear()


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any) -> None:
    """After the slowest tests: what the run cost the machine (tests.support.runcost)."""
    for cost in _cost:
        terminalreporter.write_line(cost.line(cores()))
    _cost.clear()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (`make test`): a worker per core for the modules that compute, and one per lane
    beside them, since a lane mostly waits on clocks."""
    return cores() + len(LANES)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With `--dist loadscope`: schedule by lane and module."""
    if config.getvalue("dist") == "loadscope":
        # xdist's default reorder (modules with the most tests first) put the lanes, few tests
        # each, last: the drills started 23 min into a run instead of at once
        config.option.loadscopereorder = False
        return LaneScheduling(config, log)
    return None


_niceness = 0  # what this worker's process runs at now (os.nice only raises it)
tfsetup.install()  # TensorFlow, once a fixture or test imports it: no Keras, no rewrites


def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> None:
    """Before each fixture: TensorFlow's rewrites as the test wants them (tests.support.tfsetup),
    now if it is imported, else when it is."""
    tfsetup.want(request.node)


def pytest_runtest_call(item: pytest.Item) -> None:
    """And before the test itself."""
    tfsetup.want(item)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A module outside the lanes yields the lanes' stacks the CPU: on a computing worker from
    its first test, on a lane's worker once it leaves its lane."""
    global _niceness
    if "PYTEST_XDIST_WORKER" in os.environ:
        wanted = niceness(item.nodeid, int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
        if wanted > _niceness:
            os.nice(wanted - _niceness)
            _niceness = wanted


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Once the worker's next test does not use a lane's stack this one used, tear it down (its
    fixture's own teardown: `released`); the session's end tears down the rest."""
    result = yield
    if nextitem is not None and isinstance(item, pytest.Function):
        for name in released(item.fixturenames, getattr(nextitem, "fixturenames", ())):
            for fixturedef in item._fixtureinfo.name2fixturedefs.get(name, ()):
                fixturedef.finish(item._request)
    return result


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the markers it applies
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `stack` and `training`. A module using the shared stack must be in its lane, or
    xdist could start it twice. The lanes go first, longest first, then the other modules that
    start a stack (they wait on clocks too), then the rest (stable: each module's order kept).
    Within a lane, the modules that want a quiet stack come first."""
    markers.apply(items)
    stacked = set()
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        _check_shared_fixture_unit(item, module)
        if item.get_closest_marker("stack"):
            stacked.add(scope_of(item.nodeid))

    items.sort(key=lambda item: run_order(item.nodeid, stacked))


def _check_shared_fixture_unit(item: pytest.Item, module: str) -> None:
    """A module using a shared session fixture must be in its unit, or every worker that runs
    one of its modules sets it up again."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    for unit, (name, folder) in SHARED_FIXTURES.items():
        if any(d.baseid == folder for d in defs.get(name, ())) and scope_of(module) != unit:
            raise pytest.UsageError(
                f"{module} uses {folder}'s `{name}`: list it in tests/support/stack.py with the "
                f"modules of {unit!r}"
            )


@pytest.fixture(autouse=True)
def _logging_as_found() -> Iterator[None]:
    """A test that configures logging in this process (a CLI's `main()` run in-process) leaves it
    as it found it. Otherwise every later test on its worker logs that way: a module's httpx
    client then wrote INFO lines into a captured stderr that a test expected empty, in CI only,
    where the worker had run such a test before it."""
    with tp_logging.configuration_kept():
        yield


@pytest.fixture(scope="session")
def shared_stack(tiny_export: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One alerting stack (model server, gateway, exporter with fake GPUs, shipper, Prometheus,
    Alertmanager, on-call receiver; compressed rules) for the alert e2e and live dashboards."""
    workdir = tmp_path_factory.mktemp("shared-stack")
    with running_stack(tiny_export, workdir, alerting=True) as s:
        yield s


@pytest.fixture(scope="session")
def tiny_export() -> Path:
    """One exported version directory of the `tiny` preset (read-only: copy before changing)."""
    from tests.support.models import cached_export

    return cached_export("normal")


@pytest.fixture(scope="session")
def lifecycle_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A version with the whole contract, trivial answers and an export's warmup records, for
    tests of loading, versions and warmup (tests/support/models.py; read-only)."""
    from tests.support.models import lifecycle_export

    return lifecycle_export(tmp_path_factory.mktemp("lifecycle") / "1")


@pytest.fixture(scope="session")
def tiny_degraded_export() -> Path:
    """The same model exported with noised weights, for degradation drills."""
    from tests.support.models import cached_export

    return cached_export("degraded")


@pytest.fixture
def model_base(tmp_path: Path, tiny_export: Path) -> Path:
    """A fresh model base path holding version 1 of the tiny model."""
    from tests.support.models import install_version

    base = tmp_path / "gen"
    install_version(tiny_export, base, 1)
    return base
