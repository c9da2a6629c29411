"""TensorFlow for a process that only runs graphs: imported without Keras.

`import tensorflow` (2.21) imports Keras 3 whenever it is installed, only to alias `tf.keras`:
0.65 s of a model server's start, `matplotlib.pyplot` included. A process that loads and runs
SavedModels never touches `tf.keras`, so the import is refused while TensorFlow's runs; afterwards
`import keras` works as usual (the refusal is taken back), and in a process that has TensorFlow
already nothing changes.
"""

from __future__ import annotations

import sys
from types import ModuleType


def import_tensorflow() -> ModuleType:
    """`import tensorflow`, without importing Keras along with it."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    refused = "keras" not in sys.modules
    if refused:
        sys.modules["keras"] = None  # type: ignore[assignment]  # the import system's "no such module"
    try:
        import tensorflow
    finally:
        if refused and sys.modules.get("keras", False) is None:
            del sys.modules["keras"]
    return tensorflow
