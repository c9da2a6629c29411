"""`tokenpulse model build|generate`: flags map 1:1 onto the settings models."""

from __future__ import annotations

import argparse
import json
import sys

from pydantic import ValidationError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register `build` and `generate`."""
    sub = parser.add_subparsers(dest="model_command", required=True, metavar="ACTION")
    build = sub.add_parser(
        "build", help="train (or reuse a cached checkpoint) and export a version"
    )
    build.add_argument("--preset", default="default", help="tiny | default")
    build.add_argument("--base-path", required=True, help="model base path; writes BASE/<version>")
    build.add_argument("--version", type=int, required=True)
    build.add_argument("--model-name", default="gen", help="name written into warmup records")
    build.add_argument(
        "--degrade-noise",
        type=float,
        default=0.0,
        help="export a deliberately degraded version (noise on the weights)",
    )
    build.add_argument("--cache-dir", default=".cache/tokenpulse")
    build.add_argument("--overwrite", action="store_true", help="replace an existing version dir")
    build.add_argument("--no-progress", dest="progress", action="store_false")

    gen = sub.add_parser("generate", help="load the SavedModel and print one generation")
    gen.add_argument("--base-path", required=True)
    gen.add_argument("--version", type=int, default=None, help="default: the latest version")
    gen.add_argument("--max-new-tokens", type=int, default=64)
    gen.add_argument("--temperature", type=float, default=0.8, help="0 = greedy")
    gen.add_argument("--top-k", type=int, default=0)
    gen.add_argument("--top-p", type=float, default=1.0)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--json", action="store_true", help="print the outputs as JSON")
    gen.add_argument("prompt")


def main(args: argparse.Namespace) -> int:
    """Validate the settings, then call the importable run function."""
    from tokenpulse.logging import configure_logging

    configure_logging("model")
    fields = {k: v for k, v in vars(args).items() if not k.startswith("_") and v is not None}
    try:
        if args.model_command == "build":
            from serving.model.build import run_build
            from serving.model.settings import BuildSettings

            report = run_build(BuildSettings(**fields))
            print(json.dumps(report, indent=2))
            return 0
        from serving.model.build import run_generate
        from serving.model.settings import GenerateSettings

        result = run_generate(GenerateSettings(**fields))
    except ValidationError as exc:
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            print(f"error: {loc}: {err['msg']}", file=sys.stderr)
        return 2
    except (FileNotFoundError, FileExistsError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print(result["text"])
        signals = {k: v for k, v in result.items() if k != "text"}
        print("--", " ".join(f"{k}={v}" for k, v in signals.items()), file=sys.stderr)
    return 0
