"""Write the generated dashboards to a folder, or check that the committed ones have not drifted."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from monitoring.mixin.dashboards.lint import exported_metrics, lint
from tokenpulse import paths

DEFAULT_OUT = paths.DASHBOARDS


class BuildSettings(BaseSettings):
    """Where the JSON goes, and whether only to check it."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_DASHBOARDS_", extra="ignore")

    out: Path = Field(DEFAULT_OUT, description="folder of the generated JSON files")
    check: bool = Field(False, description="write nothing; exit 1 if the files drifted")


class DashboardError(Exception):
    """The dashboards break a house rule, or the committed files differ from the generator."""


def check_lint(rendered: dict[str, str]) -> None:
    """Raise DashboardError listing every lint problem."""
    problems = lint({n: json.loads(t) for n, t in rendered.items()}, exported_metrics())
    if problems:
        raise DashboardError("dashboard lint failed:\n  " + "\n  ".join(problems))


def drift(out: Path, rendered: dict[str, str]) -> list[str]:
    """Files in `out` that are missing, stale, or not generated (stray `.json`)."""
    stale = [
        n for n, t in rendered.items() if not (out / n).is_file() or (out / n).read_text() != t
    ]
    stray = [p.name for p in out.glob("*.json") if p.name not in rendered]
    return sorted(stale + stray)


def write(out: Path, rendered: dict[str, str]) -> list[str]:
    """Write every dashboard and delete stray `.json` files; the names written."""
    out.mkdir(parents=True, exist_ok=True)
    for path in out.glob("*.json"):
        if path.name not in rendered:
            path.unlink()
    for name, text in rendered.items():
        (out / name).write_text(text)
    return sorted(rendered)
