"""The suite's XLA cache (tests/conftest.py): a second process loads what the first compiled,
from a cache that is the run's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from serving.model.supervisor import xla_flags

# a jit_compile function, the kind the training step is; prints its answer
COMPILE = """
import tensorflow as tf
step = tf.function(lambda x: tf.reduce_sum(tf.tanh(x) * 3.0), jit_compile=True)
print(float(step(tf.linspace(-1.0, 1.0, 64))))
"""
FLAG = "--tf_xla_persistent_cache_directory="


@pytest.mark.slow  # two TensorFlow processes: `make test`, not the inner loop
def test_a_second_process_loads_the_program_the_first_compiled(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TF_XLA_FLAGS"}
    env["TF_XLA_FLAGS"] = xla_flags("", tmp_path)
    folder = tmp_path / "xla"
    answers, entries = [], []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", COMPILE], capture_output=True, text=True, env=env, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        answers.append(done.stdout.strip())
        entries.append({p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.iterdir()})
    (name,) = entries[0]
    assert name.startswith("xla_compile_cache__")
    assert entries[1] == entries[0]  # loaded: a compile would have written the entry again
    assert answers[0] == answers[1] != ""


def test_the_run_compiles_into_a_cache_of_its_own() -> None:
    # made for this run by tests/conftest.py, not kept across runs where a damaged entry would stay
    (folder,) = [
        f.removeprefix(FLAG) for f in os.environ["TF_XLA_FLAGS"].split() if f.startswith(FLAG)
    ]
    assert Path(folder).is_dir() and Path(folder).parent.name.startswith("tp-xla-")
