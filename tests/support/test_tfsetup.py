"""A worker's first `import tensorflow`, from wherever it comes, goes without Keras and with the
running test's rewrites (tests/support/tfsetup.py), in a fresh process as a worker starts."""

from __future__ import annotations

import json
import subprocess
import sys

from tokenpulse.paths import ROOT

_WORKER = """
import json, sys
from types import SimpleNamespace
from tests.support import tfsetup
tfsetup.install()
marked = SimpleNamespace(get_closest_marker=lambda name: object())
plain = SimpleNamespace(get_closest_marker=lambda name: None)
tfsetup.want(plain)  # a fixture before TensorFlow exists: nothing to set yet
import tensorflow as tf  # a test body's own import
off = tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer")
keras = "keras" in sys.modules
tfsetup.want(marked)  # a `graph_rewrites` test next
on = tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer")
import keras as k  # Keras itself still imports afterwards
print(json.dumps({"off": off, "keras": keras, "on": on, "k": k.__name__}))
"""


def test_the_first_import_anywhere_skips_keras_and_sets_the_tests_rewrites() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WORKER], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["off"] is True and got["keras"] is False  # rewrites off, no Keras with it
    assert got["on"] is False and got["k"] == "keras"
