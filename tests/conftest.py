"""Shared fixtures: exported tiny models (built once, cached by model-code revision), and the one
alerting test stack that the modules which only watch a stack share.

Under pytest-xdist (`make test` runs `-n 2 --dist loadscope`), each module stays on one worker, as
its module-scoped stacks and servers expect, and the modules listed in
`tests.support.stack.SHARED_STACK_MODULES` run on one worker one after the other, so they start
the shared stack once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from devtools.stack import Stack, StackOptions, running_stack
from tests.support.stack import DRILL_STACK, SHARED_STACK, scope_of
from tokenpulse import logging as tp_logging

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


class ModuleScheduling(LoadScopeScheduling):
    """Whole modules to a worker; the shared stack's modules together, in file order."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With `--dist loadscope`: schedule by module, the shared stack's modules as one unit."""
    if config.getvalue("dist") == "loadscope":
        return ModuleScheduling(config, log)
    return None


# The longest units of work first: xdist hands them out in collection order, and the drills
# (~12 min on one worker) collected last, as tests/stack/ sorts, left one worker drilling alone
# for their whole length after the other had finished everything else (23 min against ~15).
FIRST = (DRILL_STACK, SHARED_STACK)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A module using the shared stack must be listed, or xdist could start it twice. The
    stacks' groups go first (stable: each module's own order is kept)."""
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        if "shared_stack" in getattr(item, "fixturenames", ()) and scope_of(module) == module:
            raise pytest.UsageError(
                f"{module} uses shared_stack: list it in tests/support/stack.py"
            )

    def rank(item: pytest.Item) -> int:
        scope = scope_of(item.nodeid)
        return FIRST.index(scope) if scope in FIRST else len(FIRST)

    items.sort(key=rank)


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
    with running_stack(
        tiny_export, workdir, StackOptions(alerting=True, canary_interval_s=2.0)
    ) as s:
        yield s


@pytest.fixture(scope="session")
def tiny_export() -> Path:
    """One exported version directory of the `tiny` preset (read-only: copy before changing)."""
    from tests.support.models import cached_export

    return cached_export("normal")


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
