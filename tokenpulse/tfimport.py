"""TensorFlow imported without Keras.

`import tensorflow` (2.21) imports Keras 3 whenever it is installed, only to alias `tf.keras`:
0.65 s of every start, `matplotlib.pyplot` included. Nothing of ours uses `tf.keras` (the model
is `tf.Module`s; the keras_hub import uses `keras` itself), so the import is refused while
TensorFlow's runs: here, and in every process that configured logging, on its first
`import tensorflow` (tokenpulse.native_logs). Afterwards `import keras` works as usual (the refusal
is taken back), and in a process that imported Keras first nothing changes.
"""

from __future__ import annotations

import sys
from types import ModuleType

from tokenpulse.native_logs import keras_refused


def import_tensorflow() -> ModuleType:
    """`import tensorflow`, without importing Keras along with it."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    with keras_refused():
        import tensorflow
    return tensorflow
