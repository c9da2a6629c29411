"""`tokenpulse bench scale`: throughput at 1, 2 and 3 model-server replicas behind the gateway.

One run: three model servers and one gateway per replica count (the first N servers behind it),
all started first; then phases at a fixed concurrency, the replica counts interleaved round by
round so drift hits each alike. Prints req/s, its ratio to one replica and the scaling efficiency
(ratio / N), latency, the mean batch each replica ran, and CPU per request of the model servers
and the gateway. On a 2-core machine the replicas share the same two cores: more replicas add no
compute, so the figures show what each replica costs (smaller batches, more processes), not the
speed-up a machine per replica would give. Measured here (tiny model, concurrency 16): 409, 304
and 166 req/s at 1, 2 and 3 replicas, mean batch per replica 5.3, 3.1 and 1.4, model-server CPU
per request 2.0, 3.0 and 5.8 ms; the gateway's stays about 0.5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from devtools.bench.harness import DEFAULT_MODEL_BASE, LIMITS, generator, generator_line
from stack.launch import LaunchError, running_gateway, running_modelserver
from stack.loadtest.client import Client, NativeRoute
from stack.loadtest.engine import Recording, closed_loop
from stack.loadtest.procstat import cpu_seconds
from stack.loadtest.prom import batch_totals, scrape
from stack.loadtest.stats import quantile
from stack.loadtest.workload import Cycle
from tokenpulse import paths
from tokenpulse.tfserving.config import DEFAULT_METRICS_PATH
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

HEALTHY = "tokenpulse_gateway_upstream_healthy"
FIGURES = (
    "rps", "ratio_vs_1", "efficiency", "p50_ms", "p99_ms", "batch_per_replica",
    "server_cpu_ms_per_req", "gateway_cpu_ms_per_req",
)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Bench options."""
    parser.add_argument("--model-base-path", type=Path, default=DEFAULT_MODEL_BASE)
    parser.add_argument("--model-name", default=DEFAULT_MODEL_NAME)
    parser.add_argument("--replicas", default="1,2,3", help="replica counts, comma-separated")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--requests", type=int, default=200, help="per phase")
    parser.add_argument("--rounds", type=int, default=3, help="phases per replica count")
    parser.add_argument("--max-new-tokens", type=int, default=4)
    parser.add_argument(
        "--standins",
        action="store_true",
        help="TF Serving stand-ins instead of model servers (checks the bench itself, fast)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


@dataclass
class Phase:
    """What one replica count measured over its phases."""

    replicas: int
    gateway_url: str
    gateway_pid: int
    server_pids: list[int]
    metrics_urls: list[str]
    latencies: list[float] = field(default_factory=list)
    elapsed_s: float = 0.0
    requests: int = 0
    server_cpu_s: float = 0.0
    gateway_cpu_s: float = 0.0
    batch: list[tuple[float, float]] = field(default_factory=list)  # (sum, count) per replica
    recordings: list[Recording] = field(default_factory=list)


def _cpu(pids: list[int]) -> float:
    return sum(cpu_seconds(p) for p in pids) if pids else 0.0


async def _phase(phase: Phase, key: str, args: argparse.Namespace) -> None:
    route = NativeRoute(args.model_name)
    before_batch = [batch_totals(u) for u in phase.metrics_urls]
    servers, gateway = _cpu(phase.server_pids), cpu_seconds(phase.gateway_pid)
    async with Client(phase.gateway_url, route, [key], timeout_s=120) as client:
        rec = await closed_loop(
            client, Cycle(args.max_new_tokens, seeded=False), args.concurrency, None,
            requests=args.requests, limits=LIMITS, progress=None,
        )  # fmt: skip
    failed = next((o for o in rec.outcomes if not o.ok), None)
    if failed is not None:
        raise SystemExit(f"gateway with {phase.replicas} replicas: {failed.label}")
    phase.latencies += [o.latency_s for o in rec.outcomes]
    phase.elapsed_s += rec.window_s
    phase.recordings.append(rec)
    phase.requests += args.requests
    phase.server_cpu_s += _cpu(phase.server_pids) - servers
    phase.gateway_cpu_s += cpu_seconds(phase.gateway_pid) - gateway
    after = [batch_totals(u) for u in phase.metrics_urls]
    phase.batch = [
        (s1 - s0 + prev[0], c1 - c0 + prev[1])
        for (s0, c0), (s1, c1), prev in zip(
            before_batch, after, phase.batch or [(0.0, 0.0)] * len(after), strict=True
        )
    ]


@contextlib.contextmanager
def _servers(args: argparse.Namespace, n: int) -> Iterator[list[tuple[str, int | None]]]:
    """(REST URL, pid or None for an in-process stand-in) of `n` model servers."""
    with contextlib.ExitStack() as stack:
        if args.standins:
            from devtools.standins.tfserving import TfServingStandin

            standins = [stack.enter_context(TfServingStandin()) for _ in range(n)]
            for s in standins:
                s.state.versions = {args.model_name: {1: "AVAILABLE"}}
            yield [(s.url, None) for s in standins]
            return
        if not args.model_base_path.is_dir():
            raise SystemExit(f"no model at {args.model_base_path}: run `make model`")
        servers = [
            stack.enter_context(
                running_modelserver(
                    args.model_base_path, model_name=args.model_name,
                    batching_parameters_file=paths.BATCHING_PARAMETERS, start_timeout_s=300,
                )
            )
            for _ in range(n)
        ]  # fmt: skip
        yield [(s.rest_url, s.pid) for s in servers]


def _wait_in_rotation(url: str, replicas: int) -> None:
    """Until the gateway reports every replica in rotation."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        healthy = [v for (name, _), v in scrape(f"{url}/metrics").items() if name == HEALTHY]
        if healthy.count(1.0) == replicas:
            return
        time.sleep(0.2)
    raise SystemExit(f"the gateway never had {replicas} replicas in rotation")


def _run(args: argparse.Namespace, counts: list[int]) -> dict[str, Any]:
    from serving.gateway.keys import add_key

    with contextlib.ExitStack() as stack:
        servers = stack.enter_context(_servers(args, max(counts)))
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tp-bench-scale-")))
        key = add_key(tmp / "keys.json", "bench", requests_per_minute=1e9, tokens_per_minute=1e12)
        phases = []
        for n in counts:
            urls = [u for u, _ in servers[:n]]
            gw = stack.enter_context(
                running_gateway(
                    ",".join(urls), tmp / "keys.json", models=[args.model_name],
                    max_concurrency=max(64, args.concurrency), access_log=False,
                    status_poll_interval_s=0.5,
                )
            )  # fmt: skip
            _wait_in_rotation(gw.url, n)
            pids = [p for _, p in servers[:n] if p is not None]
            metrics = [f"{u}{DEFAULT_METRICS_PATH}" for u in urls]
            phases.append(Phase(n, gw.url, gw.pid, pids, metrics))
        warm = argparse.Namespace(**{**vars(args), "requests": 4 * args.concurrency})
        for phase in phases:  # warm every path: connections, batch threads, caches
            asyncio.run(_phase(phase, key, warm))
            phase.latencies.clear()
            phase.elapsed_s = phase.requests = 0
            phase.server_cpu_s = phase.gateway_cpu_s = 0.0
            phase.batch, phase.recordings = [], []
        for _ in range(args.rounds):
            for phase in phases:
                asyncio.run(_phase(phase, key, args))
    return _figures(args, phases)


def _figures(args: argparse.Namespace, phases: list[Phase]) -> dict[str, Any]:
    base = phases[0].requests / phases[0].elapsed_s
    rows = {}
    for p in phases:
        rps = p.requests / p.elapsed_s
        batches = [s / c for s, c in p.batch if c] if p.batch else []
        rows[str(p.replicas)] = {
            "rps": rps,
            "ratio_vs_1": rps / base,
            "efficiency": rps / base / (p.replicas / phases[0].replicas),
            "p50_ms": 1000 * cast(float, quantile(p.latencies, 0.5)),
            "p99_ms": 1000 * cast(float, quantile(p.latencies, 0.99)),
            # None where stand-ins run: they batch nothing and share this process's CPU
            "batch_per_replica": statistics.fmean(batches) if batches else None,
            "server_cpu_ms_per_req": 1000 * p.server_cpu_s / p.requests if p.server_pids else None,
            "gateway_cpu_ms_per_req": 1000 * p.gateway_cpu_s / p.requests,
        }
    return {
        "model": args.model_name,
        "servers": "stand-ins" if args.standins else "tokenpulse modelserver",
        "cpus": len(os.sched_getaffinity(0)),
        "concurrency": args.concurrency,
        "max_new_tokens": args.max_new_tokens,
        "requests_per_count": args.rounds * args.requests,
        "by_replicas": rows,
        "generator": generator([r for p in phases for r in p.recordings]),
    }


def _report(r: dict[str, Any]) -> None:
    print(
        f"bench scale: {r['servers']}, model {r['model']}, max_new_tokens={r['max_new_tokens']}, "
        f"concurrency {r['concurrency']}, {r['requests_per_count']} requests per replica count"
    )
    head = ("replicas", "req/s", "vs 1", "eff.", "p50 ms", "p99 ms", "batch/rep", "srv CPU ms/req",
            "gw CPU ms/req")  # fmt: skip
    print("".join(f"{h:>15}" for h in head))
    for n, row in r["by_replicas"].items():
        cells = [n] + ["-" if row[f] is None else f"{row[f]:.2f}" for f in FIGURES]
        print("".join(f"{c:>15}" for c in cells))
    print(
        f"\nThis machine has {r['cpus']} CPU cores, shared by every replica, the gateway and this "
        "load generator: more replicas add processes, not compute. A ratio near 1 (efficiency "
        "near 1/N) is the expected ceiling here; what it shows is the per-replica overhead: each "
        "replica batches only its share of the concurrency (batch/rep falls with N), so the same "
        "work runs as more, smaller batches, and the model servers' CPU per request rises by what "
        "that and each extra process cost. On one machine (or GPU) per replica, throughput would "
        "scale with N up to the gateway's own limit (gw CPU ms/req)."
    )
    print(generator_line(r["generator"]))


def main(args: argparse.Namespace) -> int:
    """Run the bench and print the figures."""
    counts = sorted({int(n) for n in args.replicas.split(",")})
    if not counts or counts[0] < 1:
        print("bench scale: --replicas takes positive counts, e.g. 1,2,3", file=sys.stderr)
        return 2
    try:
        result = _run(args, counts)
    except LaunchError as exc:
        print(f"bench scale: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _report(result)
    return 0
