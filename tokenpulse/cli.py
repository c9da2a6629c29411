"""The one `tokenpulse` entry point: thin subcommands over importable `run(settings)` functions.

Each command module exposes `add_arguments(parser)` and `main(args) -> int`. Command modules must
not import TensorFlow at import time, so `tokenpulse gateway --help` stays fast and light.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from types import ModuleType

# subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "model": ("serving.model.cli", "train, export and try the generation model"),
    "modelserver": ("serving.modelserver.cli", "TF-Serving-compatible model server"),
    "gateway": ("serving.gateway.cli", "public generation API in front of TF Serving"),
    "exporter": ("exporter.cli", "sidecar exporter: GPU, model status, canaries"),
    "up": ("tokenpulse.up", "start the whole local stack on this machine"),
    "dashboards": ("monitoring.mixin.dashboards.cli", "build Grafana dashboards; PNG previews"),
    "grafana": ("monitoring.grafana.cli", "push dashboards to Grafana; deployment annotations"),
    "build": ("monitoring.build", "regenerate rules, Alertmanager and Prometheus files"),
    "oncall-receiver": ("monitoring.oncall.cli", "local Alertmanager webhook receiver"),
    "shipper": ("log_pipeline.commands.shipper", "ship spooled samples to SQLite/Elasticsearch"),
    "samples": ("log_pipeline.commands.samples", "search sampled generations; show one"),
    "es": ("log_pipeline.commands.es", "install Elasticsearch/Kibana assets for the samples"),
}

# `tokenpulse bench <name>` -> (module, one-line help)
BENCHES: dict[str, tuple[str, str]] = {
    "model": ("serving.model.bench", "model tokens/s, KV-cache scaling, FLOP/s vs keras_hub GPT-2"),
    "batching": ("serving.modelserver.bench", "model server with dynamic batching on vs off"),
    "gateway": ("serving.gateway.bench", "gateway overhead vs calling the model server directly"),
    "exporter": ("exporter.bench", "exporter scrape latency and RSS"),
}


def _load(module_name: str) -> ModuleType | None:
    """Import a command module; None when that component does not exist in this checkout."""
    if importlib.util.find_spec(module_name) is None:
        return None
    return importlib.import_module(module_name)


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every subcommand present in this checkout."""
    parser = argparse.ArgumentParser(prog="tokenpulse", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        module = _load(module_name)
        if module is None:
            continue
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(cmd)
        cmd.set_defaults(_module=module)
    bench = sub.add_parser("bench", help="benchmarks that print figures and ratios")
    bench_sub = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    for name, (module_name, help_text) in BENCHES.items():
        module = _load(module_name)
        if module is None:
            continue
        cmd = bench_sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(cmd)
        cmd.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and hand over to the chosen command module."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._module.main(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
