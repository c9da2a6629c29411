"""`tokenpulse shipper`: tail the spool and deliver to the embedded store and/or Elasticsearch.

Flags map 1:1 onto ShipperSettings (also TOKENPULSE_SHIPPER_* env vars), e.g.
    tokenpulse shipper --spool-dir run/spool --outputs sqlite elasticsearch \\
        --es-url http://127.0.0.1:9200 --metrics-port 9411
An output that has run once keeps its unshipped segments even when it is no longer configured;
    tokenpulse shipper --spool-dir run/spool --forget-output elasticsearch
drops its checkpoint (and exits), so those segments may go. With one spool directory per writer
(a Kubernetes volume shared by the gateway's pods, each writing to `<root>/<pod>`):
    tokenpulse shipper --spool-root /spool --state-dir /state --outputs elasticsearch ...
"""

from __future__ import annotations

import argparse
import sys

from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per ShipperSettings field."""
    from log_pipeline.settings import ShipperSettings

    add_settings_arguments(parser, ShipperSettings, style=KEBAB)
    parser.add_argument(
        "--forget-output", action="append", default=[], metavar="NAME",
        help="drop a no-longer-configured output's checkpoint, releasing the spool segments it "
        "holds, and exit (repeatable)",
    )  # fmt: skip


def main(args: argparse.Namespace) -> int:
    """Build the settings and ship until SIGTERM."""
    from log_pipeline.settings import ShipperSettings
    from log_pipeline.shipper import ForgetError, forget_output, run

    settings = settings_from_args(ShipperSettings, args)
    if not args.forget_output:
        return run(settings)
    for name in args.forget_output:
        try:
            reached = forget_output(settings, name)
        except ForgetError as exc:
            print(f"shipper: error: {exc}", file=sys.stderr)
            return 2
        for key, pos in reached.items():
            where = f"segment {pos.seq}, offset {pos.offset}" if pos else "an unreadable checkpoint"
            in_dir = f" in {key}" if key else ""
            print(f"forgot output {name}{in_dir} (it had reached {where}); its segments are no "
                  "longer held")  # fmt: skip
    return 0
