"""The tiny export loaded once a worker, for the modules that call its signatures in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def tiny_loaded(tiny_export: Path) -> Any:
    """The tiny export as TensorFlow 2 loads it (TF.Text's ops first, as the server has them),
    shared read-only by the modules of tests/support/stack.py's `tiny-loaded` unit: one load and
    one first call of each signature a worker (~2.3 CPU-s), where each module paid its own."""
    from tokenpulse.tfserving.ops import load_saved_model

    return load_saved_model(tiny_export)
