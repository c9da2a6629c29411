"""TensorFlow's native start-up lines stay out unless the log level is DEBUG."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tokenpulse.native_logs import NATIVE_CHATTER, _chatter_dropped

CHATTER = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1796097025.096305   16372 cudart_stub.cc:31] Could not find cuda drivers on your"
    " machine, GPU will not be used.",
    "W0000 00:00:1796097025.293885   16372 cpu_feature_guard.cc:227] This TensorFlow binary ...",
]
KEPT = [
    "E0000 00:00:1796097039.812071   16372 cuda_platform.cc:52] failed call to cuInit: ...",
    '{"@timestamp": "2026-12-01T04:00:00Z", "level": "info", "message": "I0000 lookalike"}',
    "Traceback (most recent call last):",
]


def test_only_info_and_warning_native_lines_count_as_chatter() -> None:
    assert all(NATIVE_CHATTER.match(line) for line in CHATTER)
    assert not any(NATIVE_CHATTER.match(line) for line in KEPT)


def test_captured_fd2_is_written_back_without_the_chatter(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with _chatter_dropped():
        os.write(2, ("\n".join(CHATTER + KEPT) + "\n").encode())
    assert capfd.readouterr().err.splitlines() == KEPT


@pytest.mark.slow
def test_tensorflow_start_up_chatter_stays_out_at_info() -> None:
    code = (
        "from tokenpulse.logging import configure_logging, get_logger\n"
        "configure_logging('demo', 'INFO')\n"
        "import tensorflow as tf\n"
        "tf.reduce_sum(tf.ones([4, 4]))\n"
        "get_logger('tests').info('done')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=180, env=env
    )
    assert done.returncode == 0, done.stderr
    for noise in ("cuInit", "cpu_feature_guard", "oneDNN", "cudart_stub", "absl::InitializeLog"):
        assert noise not in done.stderr
    assert json.loads(done.stderr.splitlines()[-1])["message"] == "done"
