"""The `stack` and `training` markers, read off what a test and its fixtures call.

A test is marked `stack` when it, or any fixture it uses (directly or through other fixtures),
starts a running stack, and `training` when it or a fixture trains or builds a TensorFlow model: the
exported test model (on a fresh clone, or after a change to serving/model, that trains it), a
bench's preset model, or a `model train` run (in-process or through the CLI). Only the
function's own code is read, not the helpers it calls.
tests/conftest.py applies them at collection, so `make test-fast` (`-m "not stack and not
training"`) needs nobody to remember a marker.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import types
from collections.abc import Callable
from typing import Any

import pytest

# what starting a stack and training look like in a test's or a fixture's own code
CALLS: dict[str, tuple[str, ...]] = {
    "stack": ("running_stack(", "running_up(", ".start_all("),
    # the CLI's benches on a preset build (and for `training`, train) its model in the subprocess
    "training": (
        "train.train(",
        "run_build(",
        "run_train(",
        '"model", "train"',
        "cached_export(",
        "cached_gpt2_preset(",  # a random-weight keras_hub preset (tests/support/hub.py)
        "cached_gpt2_import(",
        "cached_qwen_preset(",
        "cached_qwen_import(",
        '"bench", "training"',
        '"bench", "model"',
    ),
}


def _last_line(code: types.CodeType) -> int:
    """The last line any instruction of `code`, or of a function nested in it, comes from."""
    ends = [end for _, end, _, _ in code.co_positions() if end is not None]
    nested = [_last_line(c) for c in code.co_consts if isinstance(c, types.CodeType)]
    return max([code.co_firstlineno, *ends, *nested])


@functools.cache
def _source(func: Callable[..., Any]) -> str:
    """The function's code, each run of whitespace one space: a call written over several
    lines (`"model",` and `"train"` on two) reads as written on one.

    Its lines are read off the code object (first line to the last one an instruction comes
    from) rather than by `inspect.getsource`, which tokenizes each function to find its end:
    1.1 of the 7 CPU-s a collection took, and every xdist worker collects."""
    func = inspect.unwrap(func)
    code = getattr(func, "__code__", None)
    if code is None:  # a builtin fixture
        return ""
    lines = linecache.getlines(code.co_filename)[code.co_firstlineno - 1 : _last_line(code)]
    if not any(line.lstrip().startswith(("def ", "async def ")) for line in lines):
        # generated code that names the test's lines as its own (hypothesis' @given wrapper)
        try:
            lines = inspect.getsourcelines(func)[0]
        except (OSError, TypeError):
            return ""
    return " ".join("".join(lines).split())


def _functions(item: pytest.Item) -> list[Callable[..., Any]]:
    """The test function and every fixture function in its closure."""
    funcs: list[Callable[..., Any]] = []
    if isinstance(item, pytest.Function):
        funcs.append(item.function)
        for defs in item._fixtureinfo.name2fixturedefs.values():
            funcs.extend(d.func for d in defs)
    return funcs


def earned(functions: list[Callable[..., Any]]) -> set[str]:
    """The markers whose calls appear in the code of `functions`."""
    sources = [_source(f) for f in functions]
    return {kind for kind, calls in CALLS.items()
            if any(call in src for src in sources for call in calls)}  # fmt: skip


def apply(items: list[pytest.Item]) -> None:
    """Mark every item with the kinds it earns."""
    for item in items:
        for kind in earned(_functions(item)):
            item.add_marker(kind)
