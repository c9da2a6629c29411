"""`tokenpulse alertmanager-check`: refuse an Alertmanager config whose receivers' secret files are
missing, before Alertmanager starts.

Alertmanager (0.25) reads `routing_key_file`, `api_url_file` and the other `*_file` settings only
when it sends, and `amtool check-config` does not open them: without this check a deployment whose
git-ignored secrets were never put in place starts clean and fails every page silently. Every
`*_file` under a receiver (and under `global`, which receivers inherit) must be a readable,
non-empty file; relative paths count from the config's folder, as Alertmanager resolves them.
The first problem is one line naming the receiver, the setting and the file (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args

PROG = "tokenpulse alertmanager-check"


class ConfigUnreadable(ValueError):
    """The config file itself cannot be read or is not a YAML mapping."""


@dataclass(frozen=True)
class MissingSecret:
    """One `*_file` setting whose file cannot be used."""

    receiver: str  # receiver name, or "global"
    setting: str  # e.g. routing_key_file, http_config.authorization.credentials_file
    path: Path
    why: str  # "does not exist", "is empty", ...

    def __str__(self) -> str:
        where = "global" if self.receiver == "global" else f"receiver {self.receiver!r}"
        return f"{where}: {self.setting} {self.path} {self.why}"


class CheckSettings(BaseSettings):
    """Which config to check."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_AMCHECK_", extra="ignore")

    config_file: Path = Field(
        Path("/etc/alertmanager/alertmanager.yml"), description="the Alertmanager config"
    )


def _file_settings(node: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(dotted setting, value) of every `*_file` key at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            name = f"{prefix}{key}"
            if str(key).endswith("_file") and isinstance(value, str) and value:
                yield name, value
            else:
                yield from _file_settings(value, f"{name}.")
    elif isinstance(node, list):
        for item in node:
            yield from _file_settings(item, prefix)


def _why(path: Path) -> str | None:
    if not path.exists():
        return "does not exist"
    if not path.is_file():
        return "is not a file"
    try:
        with path.open("rb") as fh:
            if not fh.read(1):
                return "is empty"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return None


def load(config_file: Path) -> dict[str, Any]:
    """The config as a mapping; ConfigUnreadable otherwise."""
    try:
        doc = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigUnreadable(f"cannot read {config_file}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigUnreadable(f"{config_file} is not YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise ConfigUnreadable(f"{config_file} is not an Alertmanager config (no mapping)")
    return doc


def missing_secrets(config_file: Path) -> list[MissingSecret]:
    """Every secret file the config names that Alertmanager could not read when sending."""
    doc = load(config_file)
    owners: list[tuple[str, Any]] = [("global", doc.get("global") or {})]
    receivers = [r for r in doc.get("receivers") or [] if isinstance(r, dict)]
    owners += [(str(r.get("name", "?")), r) for r in receivers]
    out = []
    for owner, node in owners:
        for setting, value in _file_settings(node):
            path = Path(value)
            if not path.is_absolute():
                path = config_file.parent / path
            why = _why(path)
            if why:
                out.append(MissingSecret(owner, setting, Path(value), why))
    return out


def problem_line(config_file: Path) -> str | None:
    """The one line that refuses this config, or None when every secret file is in place."""
    try:
        problems = missing_secrets(config_file)
    except ConfigUnreadable as exc:
        return str(exc)
    if not problems:
        return None
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{problems[0]}: Alertmanager could not send to it{more}"


def run(settings: CheckSettings) -> int:
    """0 when the config's secret files are all in place; else one line on stderr, 2."""
    line = problem_line(settings.config_file)
    if line is None:
        sys.stdout.write(f"{settings.config_file}: every receiver's secret files are in place\n")
        return 0
    sys.stderr.write(f"{PROG}: error: {line}\n")
    return 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags from CheckSettings (each also TOKENPULSE_AMCHECK_<NAME>)."""
    add_settings_arguments(parser, CheckSettings, style=KEBAB)


def main(args: argparse.Namespace) -> int:
    """Check the config named by the flags."""
    return run(settings_from_args(CheckSettings, args))
