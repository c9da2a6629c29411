"""`tokenpulse model build|generate`: flags map 1:1 onto the settings models."""

from __future__ import annotations

import argparse
import json
import sys

from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register `build` and `generate`, their flags generated from the settings models."""
    from serving.model.settings import BuildSettings, GenerateSettings

    sub = parser.add_subparsers(dest="model_command", required=True, metavar="ACTION")
    build = sub.add_parser(
        "build", help="train (or reuse a cached checkpoint) and export a version"
    )
    add_settings_arguments(build, BuildSettings, style=KEBAB)
    gen = sub.add_parser("generate", help="load the SavedModel and print one generation")
    add_settings_arguments(gen, GenerateSettings, style=KEBAB, positional=("prompt",))
    gen.add_argument("--json", action="store_true", help="print the outputs as JSON")


def main(args: argparse.Namespace) -> int:
    """Validate the settings, then call the importable run function."""
    from serving.model.settings import BuildSettings, GenerateSettings
    from tokenpulse.logging import configure_logging

    model = BuildSettings if args.model_command == "build" else GenerateSettings
    settings = settings_from_args(model, args)
    configure_logging("model")
    try:
        if args.model_command == "build":
            from serving.model.build import run_build

            report = run_build(settings)
            print(json.dumps(report, indent=2))
            return 0
        from serving.model.build import run_generate

        result = run_generate(settings)
    except (FileNotFoundError, FileExistsError, ValueError, RuntimeError) as exc:
        print(f"tokenpulse model {args.model_command}: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print(result["text"])
        signals = {k: v for k, v in result.items() if k != "text"}
        print("--", " ".join(f"{k}={v}" for k, v in signals.items()), file=sys.stderr)
    return 0
