"""The generated dashboard files: where they go and their text (`tokenpulse build` writes them)."""

from __future__ import annotations

from pathlib import Path

from monitoring.mixin.config import MixinConfig
from monitoring.mixin.dashboards import render_all
from tokenpulse import paths

DEFAULT_OUT = paths.DASHBOARDS


def files(cfg: MixinConfig) -> dict[Path, str]:
    """`dashboards/<uid>.json` (relative to the repository root) -> JSON text, every dashboard."""
    folder = DEFAULT_OUT.relative_to(paths.ROOT)
    return {folder / name: text for name, text in render_all(cfg).items()}
