"""keras_hub's own model of each small preset, loaded once a worker."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture(scope="session")
def hub_lm() -> Callable[[str], Any]:
    """family ("gpt2", "qwen") -> keras_hub's CausalLM of its small preset (tests/support/hub.py),
    built and its weights read once a worker for the modules of tests/support/stack.py's
    `keras-hub` unit. Shared: a module may set how it generates, not its weights."""

    @functools.cache
    def load(family: str) -> Any:
        import keras_hub

        from tests.support.hub import cached_gpt2_preset, cached_qwen_preset

        preset = cached_gpt2_preset() if family == "gpt2" else cached_qwen_preset()
        return keras_hub.models.CausalLM.from_preset(str(preset))

    return load
