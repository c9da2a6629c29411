"""`tokenpulse dashboards preview`: PNG previews of the generated dashboards."""

from __future__ import annotations

import argparse
import sys

from monitoring.preview.prom import PromError
from monitoring.preview.render import PreviewSettings, run
from tokenpulse.settings_cli import add_settings_arguments, dotted, settings_from_args

PREVIEW_HELP = (
    "Render each dashboard to a PNG from Prometheus query_range results. This is a PREVIEW for "
    "machines without Grafana and for incident and load-test reports, not a Grafana "
    "replacement: time series and stat panels only, variables set to All, no interaction."
)
PREVIEW_FLAGS = dotted({"prometheus_url": "--prometheus"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `preview` subcommand, one flag per settings field."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    preview = sub.add_parser(
        "preview", help="PNG previews from Prometheus (not a Grafana replacement)",
        description=PREVIEW_HELP,
    )  # fmt: skip
    add_settings_arguments(preview, PreviewSettings, style=PREVIEW_FLAGS)


def main(args: argparse.Namespace) -> int:
    """Draw the previews; connection problems exit 1 with a one-line message."""
    try:
        for path in run(settings_from_args(PreviewSettings, args)):
            print(path)
        return 0
    except PromError as exc:
        sys.stderr.write(f"tokenpulse dashboards {args.action}: {exc}\n")
        return 1
