"""`tokenpulse alertmanager-check`: a receiver's missing secret file stops a start, in one line."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from monitoring.alertmanager_check import MissingSecret, missing_secrets
from monitoring.mixin import alertmanager
from monitoring.mixin.config import DEFAULT as mixin

amtool = pytest.mark.skipif(shutil.which("amtool") is None, reason="amtool not installed")


def _check(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stack.cli", "alertmanager-check", f"--config-file={config}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _deployment(tmp_path: Path, *present: str) -> Path:
    """The generated deployment config with its secrets under tmp_path; `present` exist."""
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    for name in present:
        (secrets / name).write_text("s3cret\n")
    config = tmp_path / "alertmanager.yml"
    config.write_text(alertmanager.render(mixin).replace(alertmanager.SECRETS, str(secrets)))
    return config


def test_missing_pager_secret_is_one_line_naming_receiver_and_file(tmp_path: Path) -> None:
    config = _deployment(tmp_path, "slack-webhook-url")
    out = _check(config)
    assert out.returncode == 2 and out.stdout == ""
    (line,) = out.stderr.splitlines()
    key = tmp_path / "secrets" / "pagerduty-routing-key"
    assert line == (
        "tokenpulse alertmanager-check: error: receiver 'pager': pagerduty_configs."
        f"routing_key_file {key} does not exist: Alertmanager could not send to it"
    )


@amtool
def test_amtool_passes_the_config_that_the_check_refuses(tmp_path: Path) -> None:
    """Why the check exists: Alertmanager's own validation never opens the files."""
    config = _deployment(tmp_path)
    amtool_out = subprocess.run(
        ["amtool", "check-config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert amtool_out.returncode == 0, amtool_out.stdout + amtool_out.stderr
    out = _check(config)
    assert out.returncode == 2 and "(and 1 more)" in out.stderr


def test_every_secret_in_place_passes(tmp_path: Path) -> None:
    config = _deployment(tmp_path, "slack-webhook-url", "pagerduty-routing-key")
    out = _check(config)
    assert out.returncode == 0, out.stderr
    assert missing_secrets(config) == []


def test_empty_relative_nested_and_global_files(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("")
    (tmp_path / "token").write_text("t")
    config = tmp_path / "am.yml"
    config.write_text(
        "global:\n  slack_api_url_file: nope\n"
        "route: {receiver: hook}\n"
        "receivers:\n"
        "- name: hook\n  webhook_configs:\n"
        "  - url: http://x\n    http_config:\n      authorization: {credentials_file: token}\n"
        "- name: mail\n  pagerduty_configs:\n  - routing_key_file: empty\n"
    )
    assert missing_secrets(config) == [
        MissingSecret("global", "slack_api_url_file", Path("nope"), "does not exist"),
        MissingSecret("mail", "pagerduty_configs.routing_key_file", Path("empty"), "is empty"),
    ]


def test_an_unreadable_config_is_one_line_too(tmp_path: Path) -> None:
    out = _check(tmp_path / "absent.yml")
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1
    assert "cannot read" in out.stderr and "Traceback" not in out.stderr
