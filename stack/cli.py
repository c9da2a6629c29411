"""The one `tokenpulse` entry point: thin subcommands over importable `run(settings)` functions.

Each command module exposes `add_arguments(parser)` and `main(args) -> int`. Command modules must
not import TensorFlow at import time, so `tokenpulse gateway --help` stays fast and light. Only the
chosen module is imported (by name, from COMMANDS); tests/test_layers.py holds these names to the
import contract like any import. `tokenpulse bench` comes from the development tools (`devtools`,
in a checkout, never in the wheel or the image): offered when they are importable, and when not,
it says how to get them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from stack import allocator
from tokenpulse.settings_cli import ArgumentParser, SettingsError

# subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "model": ("serving.model.cli", "train, export and try the generation model"),
    "modelserver": ("serving.modelserver.cli", "TF-Serving-compatible model server"),
    "gateway": ("serving.gateway.cli", "public generation API in front of TF Serving"),
    "exporter": ("exporter.cli", "sidecar exporter: GPU, model status, canaries"),
    "up": ("stack.up", "start the whole local stack on this machine"),
    "drill": ("stack.drill", "run faults against the running stack; check every page"),
    "soak": ("stack.soak", "healthy traffic for minutes: nothing pages, RSS per process"),
    "loadtest": ("stack.loadtest.cli", "load test: open/closed loop, --find-max, HTML report"),
    "dashboards": ("monitoring.preview.cli", "PNG previews of the dashboards"),
    "grafana": ("monitoring.grafana.cli", "push dashboards to Grafana; deployment annotations"),
    "build": ("stack.build", "regenerate every generated file; --check: drift and metric names"),
    "rollout": ("stack.rollout.cli", "move a version label or the canary weight; roll back"),
    "oncall-receiver": ("monitoring.oncall.cli", "local Alertmanager webhook receiver"),
    "alertmanager-check": (
        "monitoring.alertmanager_check",
        "refuse an Alertmanager config whose receivers' secret files are missing",
    ),
    "links": (
        "monitoring.deploy_links",
        "move compose's rule files and Alertmanager config to the configured link hosts",
    ),
    "shipper": ("log_pipeline.commands.shipper", "ship spooled samples to SQLite/Elasticsearch"),
    "samples": ("log_pipeline.commands.samples", "search sampled generations; show one"),
    "es": ("log_pipeline.commands.es", "install Elasticsearch/Kibana assets for the samples"),
}

DEVTOOLS_BENCHES = "devtools.bench"  # the one name the stack layer looks up above itself
NO_DEVTOOLS = (
    "the benchmarks are development tools, which the wheel and the image leave out; run them "
    "from a checkout: `make venv && .venv/bin/tokenpulse bench --help`"
)


def benches() -> dict[str, tuple[str, str]] | None:
    """`tokenpulse bench <name>` -> (module, help), or None where devtools is not installed."""
    try:
        module = importlib.import_module(DEVTOOLS_BENCHES)
    except ModuleNotFoundError as exc:
        if exc.name not in ("devtools", DEVTOOLS_BENCHES):
            raise
        return None
    return dict(module.BENCHES)


def _chosen(argv: list[str] | None, depth: int) -> str | None:
    """The `depth`-th word of argv that is not an option; None (every command) without argv."""
    if argv is None:
        return None
    words = [a for a in argv if not a.startswith("-")]
    return words[depth] if len(words) > depth else ""


def _add(sub: Any, table: dict[str, tuple[str, str]], wanted: str | None) -> None:
    # Only the chosen command's module is imported, so one command's import cost (or breakage)
    # never reaches another; `wanted is None` loads them all (tests, `tokenpulse` completion).
    for name, (module_name, help_text) in table.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        if wanted is None or wanted == name:
            module = importlib.import_module(module_name)
            module.add_arguments(cmd)
            cmd.set_defaults(_module=module)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with `argv`, only the command it names is loaded."""
    parser = ArgumentParser(prog="tokenpulse", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add(sub, COMMANDS, _chosen(argv, 0))
    bench = sub.add_parser("bench", help="benchmarks that print figures and ratios")
    table = benches()
    if table is None:
        bench.set_defaults(_module=None)
        bench.add_argument("bench", nargs="?", help=NO_DEVTOOLS)
        return parser
    bench_sub = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    _add(bench_sub, table, _chosen(argv, 1) if _chosen(argv, 0) in (None, "bench") else "")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and hand over to the chosen command module.

    Invalid settings (flags or env vars) end here as one line, `<prog>: error: <message>`, exit 2.
    """
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if args._module is None:
        print(f"{parser.prog} bench: {NO_DEVTOOLS}", file=sys.stderr)
        return 2
    try:
        allocator.settings()  # what every launch reads: wrong, it stops here, not at a launch
        return int(args._module.main(args) or 0)
    except SettingsError as exc:
        prog = getattr(args, "_settings_prog", parser.prog)
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
