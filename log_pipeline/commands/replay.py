"""`tokenpulse samples replay`: the command line of log_pipeline.replay (dead letters back to their
output); `commands/samples.py` registers it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args


def add_replay_arguments(sub: Any) -> None:
    """`samples replay`: the shipper's settings, the output, and --dry-run."""
    from log_pipeline.settings import ShipperSettings

    parser = sub.add_parser("replay", help="send an output's dead letters back to it")
    add_settings_arguments(parser, ShipperSettings, style=KEBAB)
    parser.add_argument("--output", required=True, choices=("elasticsearch", "sqlite"),
                        help="whose dead letters (deadletter-<output>*.jsonl)")  # fmt: skip
    parser.add_argument("--dry-run", action="store_true", help="count them, send nothing")


def main(args: argparse.Namespace) -> int:
    """Run the replay; print what became of the dead letters."""
    from log_pipeline.replay import ReplayError, ReplayResult, replay
    from log_pipeline.settings import ShipperSettings
    from log_pipeline.shipper import build_outputs

    args.outputs = [args.output]  # the one output to build, whatever --outputs said
    settings = settings_from_args(ShipperSettings, args)
    (output,) = build_outputs(settings)
    try:
        result = replay(settings, output, dry_run=args.dry_run)
        error = ""
    except ReplayError as exc:
        result, error = ReplayResult(), str(exc)
    finally:
        output.close()
    if error:
        print(f"samples replay: error: {error}; the rest stays in the dead letters",
              file=sys.stderr)  # fmt: skip
        return 1
    if args.dry_run:
        print(f"{args.output}: {result.kept} dead letters")
        return 0
    print(f"{args.output}: replayed {result.replayed}, dead-lettered again {result.dead_again}")
    return 1 if result.dead_again else 0
