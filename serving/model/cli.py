"""`tokenpulse model build|train|export|import|generate|check`: flags map 1:1 onto settings."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args

if TYPE_CHECKING:
    from pydantic_settings import BaseSettings

    from serving.model.settings import CheckSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the actions, their flags generated from the settings models."""
    from serving.model.settings import (
        BuildSettings,
        CheckSettings,
        ExportSettings,
        GenerateSettings,
        ImportSettings,
        TrainSettings,
    )

    sub = parser.add_subparsers(dest="model_command", required=True, metavar="ACTION")
    build = sub.add_parser(
        "build", help="train (or reuse a cached checkpoint) and export a version"
    )
    add_settings_arguments(build, BuildSettings, style=KEBAB)
    train = sub.add_parser(
        "train", help="train with checkpoints and resume, on one process or --workers N"
    )
    add_settings_arguments(train, TrainSettings, style=KEBAB)
    export = sub.add_parser("export", help="export a training checkpoint as a new version")
    add_settings_arguments(export, ExportSettings, style=KEBAB)
    imp = sub.add_parser(
        "import", help="export a causal LM from outside the project as a new version"
    )
    sources = imp.add_subparsers(dest="source", required=True, metavar="SOURCE")
    keras_hub = sources.add_parser(
        "keras-hub",
        help="a local keras_hub preset directory (save_to_preset); GPT-2 family",
    )
    add_settings_arguments(
        keras_hub, ImportSettings, style=KEBAB, exclude=("source",), positional=("preset_dir",)
    )
    gen = sub.add_parser("generate", help="load the SavedModel and print one generation")
    add_settings_arguments(gen, GenerateSettings, style=KEBAB, positional=("prompt",))
    gen.add_argument("--json", action="store_true", help="print the outputs as JSON")
    check = sub.add_parser(
        "check",
        help="validate a SavedModel against the serving contract: exit 0 servable (degraded "
        "features allowed), 1 contract broken, 2 not a SavedModel",
    )
    add_settings_arguments(check, CheckSettings, style=KEBAB, positional=("path",))
    check.add_argument("--json", action="store_true", help="print the findings as JSON")


def main(args: argparse.Namespace) -> int:
    """Validate the settings, then call the importable run function."""
    from serving.model import settings as models
    from tokenpulse.logging import configure_logging

    if args.model_command == "check":
        configure_logging("model")
        return _check(settings_from_args(models.CheckSettings, args), args.json)
    kinds: dict[str, type[BaseSettings]] = {
        "build": models.BuildSettings,
        "train": models.TrainSettings,
        "export": models.ExportSettings,
        "generate": models.GenerateSettings,
        "import": models.ImportSettings,
    }
    settings = settings_from_args(kinds[args.model_command], args)
    configure_logging("model")
    try:
        if args.model_command == "import":
            from serving.model.hub.importer import run_import

            print(json.dumps(run_import(settings), indent=2))
            return 0
        if args.model_command != "generate":
            from serving.model import build

            run: dict[str, Callable[[Any], dict[str, object]]] = {
                "build": build.run_build,
                "train": build.run_train,
                "export": build.run_export,
            }
            report = run[args.model_command](settings)
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


def _check(settings: CheckSettings, as_json: bool) -> int:
    """Print the report; the exit code says whether the gateway can serve the model."""
    from serving.model.check import NotASavedModel, run

    try:
        report = run(settings)
    except NotASavedModel as exc:
        print(f"tokenpulse model check: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_json(), indent=2) if as_json else report.table())
    return report.exit_code
