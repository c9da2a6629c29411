"""The suite's persistent XLA cache: a second process loads what the first compiled."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.models import XLA_CACHE_FLAG, with_xla_cache

# a jit_compile function, the kind the training step is; prints its answer
COMPILE = """
import tensorflow as tf
step = tf.function(lambda x: tf.reduce_sum(tf.tanh(x) * 3.0), jit_compile=True)
print(float(step(tf.linspace(-1.0, 1.0, 64))))
"""


@pytest.mark.slow  # two TensorFlow processes: `make test`, not the inner loop
def test_a_second_process_loads_the_program_the_first_compiled(tmp_path: Path) -> None:
    folder = tmp_path / "xla"
    env = {k: v for k, v in os.environ.items() if k != "TF_XLA_FLAGS"}
    env.update(with_xla_cache(env, folder))
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


def test_flags_set_already_are_kept_and_a_cache_named_there_wins() -> None:
    (flags,) = with_xla_cache({"TF_XLA_FLAGS": "--tf_xla_auto_jit=1"}, Path("/run")).values()
    assert flags == f"--tf_xla_auto_jit=1 {XLA_CACHE_FLAG}=/run"
    assert with_xla_cache({"TF_XLA_FLAGS": f"{XLA_CACHE_FLAG}=/elsewhere"}, Path("/run")) == {}


def test_the_run_compiles_into_a_cache_of_its_own() -> None:
    # made for this run by tests/conftest.py, not kept across runs where a damaged entry would stay
    flags = os.environ["TF_XLA_FLAGS"].split()
    (folder,) = [f.split("=", 1)[1] for f in flags if f.startswith(f"{XLA_CACHE_FLAG}=")]
    assert Path(folder).is_dir() and Path(folder).name.startswith("tp-xla-")
