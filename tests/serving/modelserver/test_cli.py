"""`tokenpulse modelserver` flags: TF's names, TF's boolean forms, env vars underneath."""

from __future__ import annotations

import argparse

import pytest
from pydantic import ValidationError

from serving.modelserver.cli import add_arguments, settings_from_args


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
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
    with pytest.raises(ValidationError, match="batching_parameters_file is set without"):
        settings_from_args(parse("--model_base_path=/m", "--batching_parameters_file=/b"))
    with pytest.raises(ValidationError, match="model_config_file or --model_base_path"):
        settings_from_args(parse())
    with pytest.raises(SystemExit):
        parse("--enable_batching=maybe")
