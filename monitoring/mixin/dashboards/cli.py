"""`tokenpulse dashboards build|preview`: generate the Grafana dashboards; PNG previews of them."""

from __future__ import annotations

import argparse
import sys

from monitoring.mixin.dashboards.build import (
    BuildSettings,
    DashboardError,
    check_lint,
    drift,
    write,
)
from monitoring.preview.render import PreviewSettings
from tokenpulse.settings_cli import KEBAB, add_settings_arguments, dotted, settings_from_args

PREVIEW_HELP = (
    "Render each dashboard to a PNG from Prometheus query_range results. This is a PREVIEW for "
    "machines without Grafana and for incident and load-test reports, not a Grafana "
    "replacement: time series and stat panels only, variables set to All, no interaction."
)
PREVIEW_FLAGS = dotted({"prometheus_url": "--prometheus"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`build` and `preview` subcommands, one flag per settings field."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = sub.add_parser(
        "build", help="lint, then write dashboards/*.json from the generator",
        description="Generate every dashboard from the mixin config, lint it, write the JSON.",
    )  # fmt: skip
    add_settings_arguments(build, BuildSettings, style=KEBAB)
    preview = sub.add_parser(
        "preview", help="PNG previews from Prometheus (not a Grafana replacement)",
        description=PREVIEW_HELP,
    )  # fmt: skip
    add_settings_arguments(preview, PreviewSettings, style=PREVIEW_FLAGS)


def _build(settings: BuildSettings) -> int:
    from monitoring.mixin.dashboards import render_all

    rendered = render_all()
    check_lint(rendered)
    if settings.check:
        stale = drift(settings.out, rendered)
        if stale:
            sys.stderr.write(
                f"dashboards drifted from the generator: {', '.join(stale)}; "
                "run `tokenpulse dashboards build` and commit\n"
            )
            return 1
        print(f"{len(rendered)} dashboards up to date in {settings.out}")
        return 0
    for name in write(settings.out, rendered):
        print(settings.out / name)
    return 0


def main(args: argparse.Namespace) -> int:
    """Run the chosen action; rule or connection problems exit 1 with a one-line message."""
    from monitoring.preview.prom import PromError
    from monitoring.preview.render import run

    try:
        if args.action == "build":
            return _build(settings_from_args(BuildSettings, args))
        for path in run(settings_from_args(PreviewSettings, args)):
            print(path)
        return 0
    except (DashboardError, PromError) as exc:
        sys.stderr.write(f"tokenpulse dashboards {args.action}: {exc}\n")
        return 1
