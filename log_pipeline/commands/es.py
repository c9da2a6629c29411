"""`tokenpulse es setup`: install index templates, ILM, the data stream and Kibana objects.

tokenpulse es setup --es-url http://127.0.0.1:9200 --kibana-url http://127.0.0.1:5601
"""

from __future__ import annotations

import argparse
import sys

from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`setup` with one flag per EsSetupSettings field."""
    from log_pipeline.settings import EsSetupSettings

    sub = parser.add_subparsers(dest="es_command", required=True, metavar="ACTION")
    setup = sub.add_parser("setup", help="install the assets idempotently")
    add_settings_arguments(setup, EsSetupSettings, style=KEBAB)


def main(args: argparse.Namespace) -> int:
    """Install and report each step."""
    from log_pipeline.settings import EsSetupSettings
    from log_pipeline.setup import SetupError, run

    settings = settings_from_args(EsSetupSettings, args)
    try:
        steps = run(settings)
    except SetupError as exc:
        print(f"es setup: error: {exc}", file=sys.stderr)
        return 1
    for step in steps:
        print(f"ok: {step}")
    return 0
