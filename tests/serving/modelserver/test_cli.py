"""`tokenpulse modelserver` flags: TF's names, TF's boolean forms, env vars underneath."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from serving.modelserver.cli import add_arguments, settings_from_args
from serving.modelserver.settings import ModelServerSettings
from tokenpulse.settings_cli import ArgumentParser, SettingsError


def parse(*argv: str) -> argparse.Namespace:
    parser = ArgumentParser(prog="tokenpulse modelserver")
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_tf_flag_names_and_defaults() -> None:
    s = settings_from_args(parse("--model_base_path=/m", "--port=9000"))
    assert (s.port, s.rest_api_port, s.model_name) == (9000, 8501, "default")
    assert s.file_system_poll_wait_seconds == 1.0 and s.rest_api_timeout_in_ms == 30000
    assert s.enable_model_warmup and not s.enable_batching


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--enable_batching", True),
        ("--enable_batching=true", True),
        ("--enable_batching=false", False),
        ("--enable_batching=0", False),
        ("--enable_batching=1", True),
    ],
)
def test_boolean_flags_take_tf_forms(flag: str, value: bool) -> None:
    assert settings_from_args(parse("--model_base_path=/m", flag)).enable_batching is value


def test_flags_override_env_and_env_fills_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENPULSE_MODELSERVER_REST_API_PORT", "18123")
    monkeypatch.setenv("TOKENPULSE_MODELSERVER_PORT", "18124")
    s = settings_from_args(parse("--model_base_path=/m", "--port=9000"))
    assert (s.port, s.rest_api_port) == (9000, 18123)


def test_invalid_combinations_are_refused() -> None:
    with pytest.raises(SettingsError, match="batching_parameters_file is set without"):
        settings_from_args(parse("--model_base_path=/m", "--batching_parameters_file=/b"))
    with pytest.raises(SettingsError, match="model_config_file or --model_base_path"):
        settings_from_args(parse())
    with pytest.raises(SettingsError, match="--enable_batching .*valid boolean.*got 'maybe'"):
        settings_from_args(parse("--model_base_path=/m", "--enable_batching=maybe"))


def test_help_shows_tf_names_descriptions_and_defaults() -> None:
    parser = ArgumentParser(prog="tokenpulse modelserver")
    add_arguments(parser)
    text = " ".join(parser.format_help().split())
    assert (
        "--rest_api_port N REST port; 0 disables REST and the metrics page (default: 8501;" in text
    )
    assert "--enable_batching [true|false] server-wide dynamic batching (default: false;" in text
    assert "env TOKENPULSE_MODELSERVER_ENABLE_BATCHING" in text


@pytest.mark.parametrize(
    ("argv", "env", "words"),
    [
        (
            ["--log_level=chatty"],
            {},
            "--log_level (env TOKENPULSE_MODELSERVER_LOG_LEVEL): log level",
        ),
        ([], {"TOKENPULSE_MODELSERVER_LOG_LEVEL": "chatty"}, "log level must be one of"),
        (
            ["--rest_api_port=70000"],
            {},
            "--rest_api_port (env TOKENPULSE_MODELSERVER_REST_API_PORT)",
        ),
        (["--port=x"], {}, "Input should be a valid integer"),
    ],
)
def test_bad_settings_exit_2_with_one_line_and_no_traceback(
    argv: list[str], env: dict[str, str], words: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "modelserver", "--model_base_path=/m", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert done.returncode == 2
    assert done.stderr.startswith("tokenpulse modelserver: error: ") and words in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_load_retry_flags_have_tf_serving_names_and_defaults() -> None:
    s = settings_from_args(parse("--model_base_path=/m"))
    assert (s.max_num_load_retries, s.load_retry_interval_micros) == (5, 60_000_000)
    s = settings_from_args(
        parse("--model_base_path=/m", "--max_num_load_retries=2", "--load_retry_interval_micros=10")
    )
    assert (s.max_num_load_retries, s.load_retry_interval_micros) == (2, 10)


def test_rest_limits_are_flags_and_refuse_nonsense() -> None:
    s = settings_from_args(
        parse(
            "--model_base_path=/m",
            "--rest_api_max_body_bytes=1024",
            "--rest_api_header_timeout_seconds=2.5",
            "--rest_api_idle_timeout_seconds=30",
            "--rest_api_max_connections=64",
        )
    )
    assert s.rest_api_max_body_bytes == 1024 and s.rest_api_max_connections == 64
    assert (s.rest_api_header_timeout_seconds, s.rest_api_idle_timeout_seconds) == (2.5, 30.0)
    with pytest.raises(SettingsError, match="rest_api_max_connections"):
        settings_from_args(parse("--model_base_path=/m", "--rest_api_max_connections=0"))


# One TensorFlow process for both checks below (an import is ~2.5 CPU-s): configure_tensorflow
# with the pools sized and the rewrites on, as a fresh server starts, then again with them off.
_CONFIGURED = (
    "import tensorflow as tf\n"
    "from serving.modelserver.settings import ModelServerSettings\n"
    "from serving.modelserver.server import configure_tensorflow\n"
    "def rewrites_off():\n"
    "    return tf.config.optimizer.get_experimental_options().get('disable_meta_optimizer')\n"
    "configure_tensorflow(ModelServerSettings(model_base_path='/m',"
    " tensorflow_intra_op_parallelism=3, tensorflow_inter_op_parallelism=2,"
    " graph_rewrites=True))\n"
    "print(tf.config.threading.get_intra_op_parallelism_threads(),"
    " tf.config.threading.get_inter_op_parallelism_threads(), rewrites_off())\n"
    "configure_tensorflow(ModelServerSettings(model_base_path='/m', graph_rewrites=False))\n"
    "print(rewrites_off())\n"
)


@pytest.fixture(scope="module")
def configured() -> list[str]:
    """What _CONFIGURED printed: intra, inter, rewrites off (on), rewrites off (off)."""
    proc = subprocess.run(
        [sys.executable, "-c", _CONFIGURED], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split()


def test_thread_pool_flags_size_tensorflows_pools(configured: list[str]) -> None:
    """TF Serving's --tensorflow_*_parallelism: Kubernetes sets them from the CPU limit."""
    s = settings_from_args(
        parse(
            "--model_base_path=/m",
            "--tensorflow_intra_op_parallelism=3",
            "--tensorflow_inter_op_parallelism=2",
        )
    )
    assert (s.tensorflow_intra_op_parallelism, s.tensorflow_inter_op_parallelism) == (3, 2)
    assert configured[:2] == ["3", "2"]


def test_graph_rewrites_false_turns_grappler_off_and_true_leaves_it_on(
    configured: list[str],
) -> None:
    """Off, as TF Serving's platform config's `disable_meta_optimizer` turns it off; on by
    default (the suite's environment sets it off: tests.support.modelserver)."""
    assert ModelServerSettings.model_fields["graph_rewrites"].default is True
    s = settings_from_args(parse("--model_base_path=/m", "--graph_rewrites=false"))
    assert s.graph_rewrites is False
    assert configured[2:] == ["False", "True"]
