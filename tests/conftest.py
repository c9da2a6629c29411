"""Shared fixtures: exported tiny models (built once, cached by model-code revision)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


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
