"""TensorFlow imported without Keras; Keras still importable after (a fresh process each)."""

from __future__ import annotations

import subprocess
import sys

from tokenpulse.paths import ROOT


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_tensorflow_runs_a_graph_without_keras_and_keras_imports_afterwards() -> None:
    out = _run(
        "import sys\n"
        "from tokenpulse.tfimport import import_tensorflow\n"
        "tf = import_tensorflow()\n"
        "print(float(tf.reduce_sum(tf.ones([2, 3]))), 'keras' in sys.modules,"
        " 'matplotlib' in sys.modules)\n"
        "import keras\n"
        "print(keras.__name__, keras.ops.sum(keras.ops.ones([2])).numpy())\n"
    )
    assert out.splitlines() == ["6.0 False False", "keras 2.0"]


def test_a_process_with_tensorflow_already_gets_that_module_back() -> None:
    out = _run(
        "import tensorflow, sys\n"
        "from tokenpulse.tfimport import import_tensorflow\n"
        "print(import_tensorflow() is tensorflow, 'keras' in sys.modules)\n"
    )
    assert out == "True True"


def test_a_configured_process_imports_tensorflow_without_keras_and_keras_after() -> None:
    out = _run(
        "import sys\n"
        "from tokenpulse.logging import configure_logging\n"
        "configure_logging('test', 'INFO')\n"
        "import tensorflow as tf\n"
        "print(float(tf.reduce_sum(tf.ones([2, 2]))), 'keras' in sys.modules,"
        " 'matplotlib' in sys.modules)\n"
        "import keras\n"
        "print(keras.__name__, keras.ops.sum(keras.ops.ones([3])).numpy())\n"
    )
    assert out.splitlines() == ["4.0 False False", "keras 3.0"]
