"""`tokenpulse shipper`: tail the spool and deliver to the embedded store and/or Elasticsearch.

Flags map 1:1 onto ShipperSettings (also TOKENPULSE_SHIPPER_* env vars), e.g.
    tokenpulse shipper --spool-dir run/spool --outputs sqlite elasticsearch \\
        --es-url http://127.0.0.1:9200 --metrics-port 9411
"""

from __future__ import annotations

import argparse

from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per ShipperSettings field."""
    from log_pipeline.settings import ShipperSettings

    add_settings_arguments(parser, ShipperSettings, style=KEBAB)


def main(args: argparse.Namespace) -> int:
    """Build the settings and ship until SIGTERM."""
    from log_pipeline.settings import ShipperSettings
    from log_pipeline.shipper import run

    return run(settings_from_args(ShipperSettings, args))
