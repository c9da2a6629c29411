"""`tokenpulse gateway`: flags map onto settings; bad settings fail fast with a clear message."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from serving.gateway import cli
from serving.gateway.keys import add_key
from serving.gateway.settings import GatewaySettings
from tokenpulse.settings_cli import ArgumentParser


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="tokenpulse gateway")
    cli.add_arguments(parser)
    return parser


def _parse(*argv: str) -> argparse.Namespace:
    return _parser().parse_args(list(argv))


def test_every_setting_has_a_flag_with_its_description_and_default() -> None:
    text = " ".join(_parser().format_help().split())
    for name, field in GatewaySettings.model_fields.items():
        assert f"--{name.replace('_', '-')}" in text
        assert f"{field.description} (default: " in text, name
        assert f"env TOKENPULSE_GATEWAY_{name.upper()})" in text
    assert "--max-queue N requests that may wait for a slot (default: 256;" in text


def test_flags_reach_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text('{"keys": []}')
    seen: list[GatewaySettings] = []
    monkeypatch.setattr("serving.gateway.server.run", lambda s: seen.append(s) or 0)
    monkeypatch.setenv("TOKENPULSE_GATEWAY_MAX_QUEUE", "7")  # env fills what flags leave out
    args = _parse(
        "--keys-file", str(keys), "--port", "9123", "--models", "gen", "other",
        "--canary-weight", "0.25", "--no-access-log",
    )  # fmt: skip
    assert cli.main(args) == 0
    (s,) = seen
    assert (s.port, s.models, s.canary_weight, s.access_log, s.max_queue) == (
        9123, ["gen", "other"], 0.25, False, 7,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--canary-weight", "2"], "--canary-weight (env TOKENPULSE_GATEWAY_CANARY_WEIGHT)"),
        (["--upstream-url", "localhost:8501"], "upstream_url must start with http"),
        (["--stable-label", "a-b"], "--stable-label (env TOKENPULSE_GATEWAY_STABLE_LABEL)"),
        (["--default-max-new-tokens", "900"], "max_new_tokens_limit"),
        (["--log-level", "chatty"], "--log-level (env TOKENPULSE_GATEWAY_LOG_LEVEL): log level"),
    ],
)
def test_bad_settings_exit_2_with_a_message(tmp_path: Path, argv: list[str], words: str) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text('{"keys": []}')
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "gateway", "--keys-file", str(keys), *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("tokenpulse gateway: error: ") and words in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_missing_keys_file_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "gateway", "--keys-file", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "does not exist" in done.stderr


@pytest.mark.parametrize(
    ("text", "words"), [("not json", "is not valid json"), ('{"keys": 3}', "'keys' list")]
)
def test_malformed_keys_file_is_one_line_not_a_traceback(
    tmp_path: Path, text: str, words: str
) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "gateway", "--keys-file", str(keys)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr


def _readme_key_commands() -> list[list[str]]:
    """Every `tokenpulse gateway keys add ...` command line in the project's markdown files."""
    root = Path(__file__).resolve().parents[3]
    found = []
    for doc in [root / "README.md", *root.glob("serving/**/*.md"), *root.glob("exporter/**/*.md")]:
        for match in re.finditer(r"tokenpulse gateway keys add ([^`#\n]*)", doc.read_text()):
            found.append(shlex.split(match[1]))
    return found


def test_readme_key_commands_work_after_make_up(tmp_path: Path) -> None:
    commands = _readme_key_commands()
    assert commands
    for n, argv in enumerate(commands):
        keys = tmp_path / f"{n}" / "gateway-keys.json"
        keys.parent.mkdir()
        add_key(keys, "demo")  # what `make up` leaves in run/gateway-keys.json
        assert argv[argv.index("--file") + 1] == "run/gateway-keys.json", argv
        argv[argv.index("--file") + 1] = str(keys)
        done = subprocess.run(
            [sys.executable, "-m", "stack.cli", "gateway", "keys", "add", *argv],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, (argv, done.stderr)
        assert done.stdout.strip() and done.stdout.strip() not in keys.read_text()
