"""`tokenpulse dashboards build|preview`: generate the Grafana dashboards; PNG previews of them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from monitoring.mixin.dashboards.build import DEFAULT_OUT, DashboardError, check_lint, drift, write

PREVIEW_HELP = (
    "render each dashboard to a PNG from Prometheus query_range results. A PREVIEW for machines "
    "without Grafana and for incident and load-test reports, not a Grafana replacement: time "
    "series and stat panels only, no interaction."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`build` and `preview` subcommands."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = sub.add_parser(
        "build", help="write dashboards/*.json from the generator (lint first)",
        description="Generate every dashboard from the mixin config, lint it, write the JSON.",
    )  # fmt: skip
    build.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="folder (default: %(default)s)"
    )
    build.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the files drifted"
    )
    preview = sub.add_parser("preview", help=PREVIEW_HELP, description=PREVIEW_HELP)
    preview.add_argument("--prometheus", required=True, help="Prometheus base URL")
    preview.add_argument("--out", type=Path, required=True, help="folder for the PNG files")
    preview.add_argument(
        "--since", default="15m", help="time range ending now, e.g. 15m, 1h (default: %(default)s)"
    )
    preview.add_argument(
        "--rate-interval", default="1m", help="value of $__rate_interval (default: %(default)s)"
    )
    preview.add_argument(
        "--dashboards", type=Path, default=DEFAULT_OUT, help="JSON folder (default: %(default)s)"
    )


def _build(args: argparse.Namespace) -> int:
    from monitoring.mixin.dashboards import render_all

    rendered = render_all()
    check_lint(rendered)
    if args.check:
        stale = drift(args.out, rendered)
        if stale:
            sys.stderr.write(
                f"dashboards drifted from the generator: {', '.join(stale)}; "
                "run `tokenpulse dashboards build` and commit\n"
            )
            return 1
        print(f"{len(rendered)} dashboards up to date in {args.out}")
        return 0
    for name in write(args.out, rendered):
        print(args.out / name)
    return 0


def _preview(args: argparse.Namespace) -> int:
    from monitoring.preview.render import PreviewSettings, run

    settings = PreviewSettings(
        prometheus_url=args.prometheus, out=args.out, since=args.since,
        rate_interval=args.rate_interval, dashboards=args.dashboards,
    )  # fmt: skip
    for path in run(settings):
        print(path)
    return 0


def main(args: argparse.Namespace) -> int:
    """Run the chosen action; rule or connection problems exit 1 with a one-line message."""
    from monitoring.preview.prom import PromError

    try:
        return _build(args) if args.action == "build" else _preview(args)
    except (DashboardError, PromError) as exc:
        sys.stderr.write(f"tokenpulse dashboards {args.action}: {exc}\n")
        return 1
