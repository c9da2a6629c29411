"""TensorFlow imported without Keras.

`import tensorflow` (2.21) imports Keras 3 whenever it is installed, only to alias `tf.keras`:
0.65 s of every start, `matplotlib.pyplot` included. Nothing of ours uses `tf.keras` (the model
is `tf.Module`s; the keras_hub import uses `keras` itself), so the import is refused while
TensorFlow's runs: here, and in every process that configured logging, on its first
`import tensorflow` (tokenpulse.native_logs). Afterwards `import keras` works as usual (the refusal
is taken back), and in a process that imported Keras first nothing changes.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from types import ModuleType


@contextlib.contextmanager
def keras_refused() -> Iterator[None]:
    """For the block, `import keras` fails as a missing module's would (TensorFlow then leaves
    `tf.keras` to load later); unless Keras is imported already."""
    refused = "keras" not in sys.modules
    if refused:
        sys.modules["keras"] = None  # type: ignore[assignment]  # the import system's "no such module"
    try:
        yield
    finally:
        if refused and sys.modules.get("keras", False) is None:
            del sys.modules["keras"]


def import_tensorflow() -> ModuleType:
    """`import tensorflow`, without importing Keras along with it."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    with keras_refused():
        import tensorflow
    return tensorflow
