"""Fixtures for gateway tests: a TF Serving stand-in, keys files, and the end-to-end modules'
shared model server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.standins.tfserving import TfServingStandin
from tests.support.gateway import TinyGen, make_keys_file
from tests.support.models import install_version
from tests.support.modelserver import running_modelserver


@pytest.fixture
def standin() -> Iterator[TfServingStandin]:
    """A fresh TF Serving REST stand-in on a free port."""
    with TfServingStandin() as server:
        yield server


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    """Path of a keys file; `keys` fills it."""
    return tmp_path / "keys.json"


@pytest.fixture
def keys(keys_file: Path) -> dict[str, str]:
    """id → key: `demo` (all models), `limited` (2 requests/min), `other` (another model only)."""
    return make_keys_file(
        keys_file,
        demo={},
        limited={"requests_per_minute": 2},
        other={"models": ["not-gen"]},
    )


@pytest.fixture(scope="session")
def tiny_gen(tmp_path_factory: pytest.TempPathFactory, tiny_export: Path) -> Iterator[TinyGen]:
    """One model server for the gateway's end-to-end modules (one unit of work:
    tests/support/stack.py's SHARED_FIXTURE_UNITS): versions 1 and 2 of the tiny export in `gen`,
    every version served, labels stable=1 and canary=2. Each module puts its own gateway in
    front; none stops or reconfigures the server."""
    tmp = tmp_path_factory.mktemp("tiny-gen")
    base = tmp / "gen"
    install_version(tiny_export, base, 1)
    install_version(tiny_export, base, 2)
    config = tmp / "models.config"
    labels = "version_labels { key: 'stable' value: 1 } version_labels { key: 'canary' value: 2 }"
    config.write_text(
        f"model_config_list {{ config {{ name: 'gen' base_path: '{base}'\n"
        f"  model_platform: 'tensorflow' model_version_policy {{ all {{}} }}\n  {labels}\n}} }}\n"
    )
    with running_modelserver(config_file=config) as server:
        yield TinyGen(server, config)
