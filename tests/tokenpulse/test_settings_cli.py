"""Settings models become CLIs: help text, env underneath, flags on top, one error format."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from stack import cli
from tokenpulse.logging import LogLevel
from tokenpulse.settings_cli import (
    KEBAB,
    TF,
    ArgumentParser,
    FlagStyle,
    SettingsError,
    add_settings_arguments,
    dotted,
    settings_from_args,
)


class Demo(BaseSettings):
    """A settings model with one field of each kind the components use."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_DEMO_")

    name: str = Field(description="what to call it")
    max_queue: int = Field(8, ge=1, description="requests that may wait")
    models: list[str] = Field(default_factory=lambda: ["gen"], description="model names")
    access_log: bool = Field(True, description="one line per request")
    config_file: Path | None = Field(None, description="a config file")
    log_level: LogLevel = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")


def parse(*argv: str, style: FlagStyle = KEBAB) -> argparse.Namespace:
    parser = ArgumentParser(prog="demo")
    add_settings_arguments(parser, Demo, style=style)
    return parser.parse_args(list(argv))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for field in Demo.model_fields:
        monkeypatch.delenv(f"TOKENPULSE_DEMO_{field.upper()}", raising=False)


def test_help_shows_description_default_and_env_var_of_every_field() -> None:
    parser = ArgumentParser(prog="demo")
    add_settings_arguments(parser, Demo)
    text = " ".join(parser.format_help().split())
    assert (
        "--max-queue N requests that may wait (default: 8; env TOKENPULSE_DEMO_MAX_QUEUE)" in text
    )
    assert "--models MODELS [MODELS ...] model names (default: gen;" in text
    assert "--access-log, --no-access-log one line per request (default: true;" in text
    assert "what to call it (default: required; env TOKENPULSE_DEMO_NAME)" in text
    assert "a config file (default: none; env TOKENPULSE_DEMO_CONFIG_FILE)" in text


def test_env_fills_what_flags_leave_out_and_flags_beat_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENPULSE_DEMO_NAME", "from-env")
    monkeypatch.setenv("TOKENPULSE_DEMO_MAX_QUEUE", "3")
    monkeypatch.setenv("TOKENPULSE_DEMO_ACCESS_LOG", "false")
    s = settings_from_args(Demo, parse("--max-queue", "5", "--models", "a", "b"))
    assert (s.name, s.max_queue, s.models, s.access_log) == ("from-env", 5, ["a", "b"], False)
    s = settings_from_args(Demo, parse("--access-log"))
    assert (s.max_queue, s.access_log) == (3, True)


def test_absent_flags_stay_out_of_the_namespace() -> None:
    assert not any(name in vars(parse()) for name in Demo.model_fields)


def test_bad_values_give_one_line_naming_flag_and_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENPULSE_DEMO_LOG_LEVEL", "LOUD")
    with pytest.raises(SettingsError) as caught:
        settings_from_args(Demo, parse("--max-queue", "0"))
    message = str(caught.value)
    assert "\n" not in message
    assert "--name (env TOKENPULSE_DEMO_NAME): Field required" in message
    assert "--max-queue (env TOKENPULSE_DEMO_MAX_QUEUE): Input should be greater" in message
    assert "got '0'" in message
    assert "--log-level (env TOKENPULSE_DEMO_LOG_LEVEL): log level must be one of" in message


def test_a_huge_bad_value_is_echoed_cut_with_its_length() -> None:
    huge = "9" * 50_000 + "x"  # not an int: the error echoes what it got
    with pytest.raises(SettingsError) as caught:
        settings_from_args(Demo, parse("--name", "n", "--max-queue", huge))
    message = str(caught.value)
    assert len(message) < 300
    assert message.endswith(f"got '{'9' * 79}... (50001 characters)")


def test_tf_style_keeps_tf_serving_spellings_and_boolean_forms() -> None:
    for flag, value in [
        ("--access_log", True),
        ("--access_log=false", False),
        ("--access_log=1", True),
    ]:
        s = settings_from_args(Demo, parse("--name=x", "--max_queue=4", flag, style=TF))
        assert (s.max_queue, s.access_log) == (4, value)
    with pytest.raises(
        SettingsError, match=r"--access_log \(env .*\): Input should be a valid boolean"
    ):
        settings_from_args(Demo, parse("--name=x", "--access_log=maybe", style=TF))


def test_dotted_style_takes_explicit_names() -> None:
    style = dotted({"max_queue": "--queue.max", "access_log": "--log.access"})
    s = settings_from_args(Demo, parse("--name=x", "--queue.max=2", "--no-log.access", style=style))
    assert (s.max_queue, s.access_log) == (2, False)
    with pytest.raises(SettingsError, match=r"^--queue.max \(env TOKENPULSE_DEMO_MAX_QUEUE\)"):
        settings_from_args(Demo, parse("--name=x", "--queue.max=-1", style=style))


def test_positional_fields() -> None:
    parser = ArgumentParser(prog="demo")
    add_settings_arguments(parser, Demo, positional=("name",))
    assert settings_from_args(Demo, parser.parse_args(["hello"])).name == "hello"


# `tokenpulse demo` below uses this module as a command module.
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of the demo command."""
    add_settings_arguments(parser, Demo)


def main(args: argparse.Namespace) -> int:
    """Validate, then succeed."""
    settings_from_args(Demo, args)
    return 0


def test_entry_point_prints_one_error_line_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(cli.COMMANDS, "demo", (__name__, "demo command"))
    assert cli.main(["demo", "--name", "x"]) == 0
    assert cli.main(["demo", "--name", "x", "--log-level", "chatty"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tokenpulse demo: error: --log-level (env TOKENPULSE_DEMO_LOG_LEVEL)")
    assert err.count("\n") == 1 and "Traceback" not in err
    with pytest.raises(SystemExit) as exited:  # argparse's own errors: same one-line format
        cli.main(["demo", "--no-such-flag"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err == "tokenpulse: error: unrecognized arguments: --no-such-flag (see --help)\n"
