"""TensorFlow in a test worker: imported late, without Keras, and without Grappler's rewrites.

Collection imports no TensorFlow (tests/test_collection.py): a worker imports it when the first
fixture or test that needs it runs, often as a plain `import tensorflow` in a test's body. The
import hook installed here makes every such import go as `tokenpulse.tfimport`'s does (without
Keras, which `tf.keras` would load for nothing: 0.6 s) and sets the rewrites the running fixture
or test wants the moment TensorFlow exists, so that its first traced calls already run without
them.

The suite's tiny graphs gain nothing from Grappler's rewrites, and each traced function's first
call paid for them (test_stops and test_continuation: 44.5 CPU-s with them, 32 without), as every
model server the suite starts runs without them (tests.support.modelserver). A test marked
`graph_rewrites` (it counts the kernels the stock server runs) gets them. The CLI's processes
keep them.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from tokenpulse.native_logs import ExecModule, FirstTensorFlowImport, keras_refused

_wanted = False  # the rewrites the running fixture or test wants
_applied: bool | None = None  # the rewrites this process's TensorFlow runs with, once set


def want(node: Any) -> None:
    """Before a fixture or a test: its rewrites, applied now if TensorFlow is imported, else
    when it is."""
    global _wanted
    _wanted = node.get_closest_marker("graph_rewrites") is not None
    tf = sys.modules.get("tensorflow")
    if tf is not None and getattr(tf, "config", None) is not None:
        _apply(tf)


def _apply(tf: ModuleType) -> None:
    global _applied
    if _wanted is not _applied:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": not _wanted})
        _applied = _wanted


def _imported(exec_module: ExecModule, module: ModuleType) -> None:
    """Import TensorFlow as tokenpulse.tfimport does, then set the rewrites."""
    with keras_refused():
        exec_module(module)
    _apply(module)


_HOOK = FirstTensorFlowImport(_imported)


def install() -> None:
    """In a process that has not imported TensorFlow yet, hook its first import."""
    _HOOK.install()
