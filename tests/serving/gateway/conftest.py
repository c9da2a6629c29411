"""Fixtures for gateway tests: a TF Serving stand-in, keys files, and a gateway subprocess."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.standins.tfserving import TfServingStandin
from tests.support.gateway import make_keys_file


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
