"""`tokenpulse bench launch`: a component exec'd afresh vs forked from the launcher's zygote.

Starts each component `--starts` times each way, the two ways alternating so that a busy moment
of the machine falls on both, through stack.launch as tests, benches and `up` start them: exec'd
(TOKENPULSE_ZYGOTE_ENABLED=false) and forked from the zygote (stack/zygote.py). For each start it
reads the child's CPU seconds once it is ready, and the wall time from spawn to ready. Prints the
medians side by side, their ratios, what the zygote itself cost to start (once per launching
process), and after how many starts forking has paid for it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from devtools.bench.harness import add_model_arguments, model_missing, positive, progress
from stack.launch import Launched, running_gateway, running_modelserver
from stack.loadtest.procstat import cpu_seconds
from stack.zygote import SOCKETS_VARIABLE, ZygoteChild, kind_of

COMPONENTS = ("modelserver", "gateway")
WAYS = ("exec", "zygote")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Bench options."""
    add_model_arguments(parser)
    parser.add_argument("--starts", type=positive, default=5, help="starts per component and way")
    parser.add_argument(
        "--components", nargs="+", choices=COMPONENTS, default=list(COMPONENTS),
        help="what to start (the model server needs --model-base-path)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print one JSON document")


@contextlib.contextmanager
def _way(way: str) -> Iterator[None]:
    before = os.environ.get("TOKENPULSE_ZYGOTE_ENABLED")
    os.environ["TOKENPULSE_ZYGOTE_ENABLED"] = "true" if way == "zygote" else "false"
    try:
        yield
    finally:
        if before is None:
            del os.environ["TOKENPULSE_ZYGOTE_ENABLED"]
        else:
            os.environ["TOKENPULSE_ZYGOTE_ENABLED"] = before


def _start(component: str, args: argparse.Namespace, tmp: Path) -> Any:
    if component == "modelserver":
        return running_modelserver(args.model_base_path, model_name=args.model_name)
    keys = tmp / "keys.json"
    keys.write_text('{"keys": []}')
    return running_gateway("http://127.0.0.1:9", keys)  # /healthz needs no upstream


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Per component and way: each start's CPU-s and seconds to ready; the zygote's own cost."""
    say = progress("launch")
    starts: dict[str, dict[str, list[dict[str, float]]]] = {
        c: {w: [] for w in WAYS} for c in args.components
    }
    zygote_cpu_s: dict[str, float] = {}  # by kind
    with tempfile.TemporaryDirectory(prefix="tp-bench-launch-") as tmp:
        for i in range(args.starts):
            for component in args.components:
                for way in WAYS if i % 2 == 0 else WAYS[::-1]:
                    with _way(way), _start(component, args, Path(tmp)) as child:
                        launched: Launched = child
                        if isinstance(launched.process, ZygoteChild) != (way == "zygote"):
                            raise RuntimeError(f"{component} did not start the {way} way")
                        kind = kind_of(component)
                        if way == "zygote" and kind not in zygote_cpu_s:
                            zygote_cpu_s[kind] = cpu_seconds(_parent(launched.pid))
                        starts[component][way].append(
                            {"cpu_s": cpu_seconds(launched.pid), "ready_s": launched.started_in_s}
                        )
            say(f"round {i + 1}/{args.starts}")
    return {"starts": starts, "zygote_cpu_s": zygote_cpu_s}


def summarise(measured: dict[str, Any]) -> dict[str, Any]:
    """Medians per component and way, zygote/exec ratios, what the component's zygote cost to
    start, and after how many starts of the component the zygote has paid for itself."""
    rows = []
    for component, ways in measured["starts"].items():
        row: dict[str, Any] = {"component": component, "zygote": kind_of(component)}
        for way, runs in ways.items():
            row[f"{way}_cpu_s"] = statistics.median(r["cpu_s"] for r in runs)
            row[f"{way}_ready_s"] = statistics.median(r["ready_s"] for r in runs)
        row["cpu_ratio"] = row["zygote_cpu_s"] / row["exec_cpu_s"]
        row["ready_ratio"] = row["zygote_ready_s"] / row["exec_ready_s"]
        row["zygote_start_cpu_s"] = cost = measured["zygote_cpu_s"][row["zygote"]]
        saved = row["exec_cpu_s"] - row["zygote_cpu_s"]
        row["starts_to_repay"] = cost / saved if saved > 0 else None
        rows.append(row)
    return {"components": rows}


def report(summary: dict[str, Any]) -> str:
    """The figures as a table."""
    lines = [
        f"{'component':<12} {'exec CPU-s':>10} {'zygote CPU-s':>12} {'ratio':>6}"
        f" {'exec ready s':>12} {'zygote ready s':>14} {'ratio':>6}"
    ]
    for r in summary["components"]:
        lines.append(
            f"{r['component']:<12} {r['exec_cpu_s']:>10.2f} {r['zygote_cpu_s']:>12.2f}"
            f" {r['cpu_ratio']:>6.2f} {r['exec_ready_s']:>12.2f} {r['zygote_ready_s']:>14.2f}"
            f" {r['ready_ratio']:>6.2f}"
        )
    for r in summary["components"]:
        repaid = r["starts_to_repay"]
        lines.append(
            f"{r['component']}: its zygote ({r['zygote']}) started on "
            f"{r['zygote_start_cpu_s']:.2f} CPU-s, once per launching process"
            + (f"; repaid after {repaid:.1f} start(s)" if repaid is not None else "")
        )
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    if "modelserver" in args.components and model_missing(args):
        return 2
    os.environ.pop(SOCKETS_VARIABLE, None)  # this process's own zygotes: their starts are figures
    summary = summarise(measure(args))
    print(json.dumps(summary, indent=2) if args.json else report(summary))
    return 0
