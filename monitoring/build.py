"""`tokenpulse build monitoring`: regenerate every file the mixin config drives.

Writes the recording and alerting rules (plus their time-compressed copies for tests), the
Alertmanager configs (deployment and local) and the compose Prometheus config. `--check` writes
nothing and exits 1 listing the files that differ from what the generator makes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tokenpulse import paths

ROOT = paths.ROOT


def generated_files() -> dict[Path, str]:
    """Every generated file (path relative to the repository root) and its content."""
    from monitoring.mixin import alertmanager, prometheus, rules

    files: dict[Path, str] = {}
    for name, text in rules.render_files().items():
        files[Path("alerts") / name] = text
    for name, text in rules.render_files(compressed=True).items():
        files[Path("alerts") / "compressed" / name] = text
    files[Path("monitoring/alertmanager/alertmanager.yml")] = alertmanager.render()
    files[Path("monitoring/alertmanager/alertmanager.local.yml")] = alertmanager.render_local(
        "http://127.0.0.1:9095"
    )
    files[Path("monitoring/prometheus/prometheus.yml")] = prometheus.render_compose()
    return files


def drifted(root: Path = ROOT) -> list[Path]:
    """Generated files whose committed content differs from the generator's."""
    out = []
    for rel, text in generated_files().items():
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            out.append(rel)
    return out


def write_all(root: Path = ROOT) -> list[Path]:
    """Write every generated file; return the paths that changed."""
    changed = []
    for rel, text in generated_files().items():
        path = root / rel
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        changed.append(rel)
    return changed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`tokenpulse build monitoring [--check]`."""
    parser.add_argument("target", choices=["monitoring"], help="what to build")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if any file is out of date"
    )


def main(args: argparse.Namespace) -> int:
    """Regenerate (or check) the monitoring files."""
    if args.check:
        stale = drifted()
        for rel in stale:
            print(f"out of date: {rel}", file=sys.stderr)  # noqa: T201
        return 1 if stale else 0
    for rel in write_all():
        print(f"wrote {rel}")  # noqa: T201  # noqa: T201
    return 0
