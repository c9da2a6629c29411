"""`tokenpulse bench gateway`: the gateway against calling the model server directly, side by side.

One run, same model server, same requests: latency at concurrency 1 (direct and gateway calls
interleaved, so drift hits both alike) and throughput at concurrency 32 (alternating phases).
Prints the gateway's added p50/p99 and its throughput ratio, plus its start-up time and RSS.
Targets: added p50 <= 2 ms, throughput >= 95% of direct, start-up < 2 s, RSS < 150 MB.
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
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from devtools.bench.harness import DEFAULT_MODEL_BASE, cpu_split, percentile, pin, rss_bytes
from stack.launch import (
    LaunchError,
    available_versions,
    running_gateway,
    running_modelserver,
)
from tokenpulse import paths
from tokenpulse.tfserving.predict import predict_path, row_request
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME, SIGNATURE_NAME, default_row

CONFIG_DIR = paths.SERVING_CONFIG
PROMPTS = ["The service was", "Once upon a time", "Monitoring tells us", "A model server"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Bench options."""
    parser.add_argument("--upstream", help="model server REST URL (default: start one)")
    parser.add_argument("--model-base-path", type=Path, default=DEFAULT_MODEL_BASE)
    parser.add_argument("--model-name", default=DEFAULT_MODEL_NAME)
    parser.add_argument("--requests", type=int, default=200, help="pairs at concurrency 1")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--throughput-requests", type=int, default=600, help="per phase")
    parser.add_argument("--rounds", type=int, default=5, help="direct/gateway phase pairs")
    parser.add_argument("--max-new-tokens", type=int, default=4)
    parser.add_argument(
        "--isolate-cpus",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="pin the model server to all CPUs but the last, the gateway and this load generator "
        "to the last, so both paths give the model server the same CPU (default: on)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


@contextlib.contextmanager
def _model_server(base_path: Path, model: str, cpus: set[int] | None = None) -> Iterator[str]:
    """Start `tokenpulse modelserver` (batching as under `make up`) and wait for AVAILABLE."""
    if not base_path.is_dir():
        raise SystemExit(f"no model at {base_path}: run `make model`, or pass --upstream")
    with running_modelserver(
        base_path,
        model_name=model,
        batching_parameters_file=CONFIG_DIR / "batching_parameters.txt",
        start_timeout_s=180,
    ) as server:
        if cpus:
            pin(server.pid, cpus)
        yield server.rest_url


class Target:
    """One way to ask for a generation: direct (TF Serving REST) or through the gateway."""

    def __init__(self, url: str, headers: dict[str, str], body: Any) -> None:
        self.url, self.headers = url, headers
        self.bodies = [json.dumps(body(p)).encode() for p in PROMPTS]

    async def call(self, session: Any, i: int) -> float:
        start = time.perf_counter()
        async with session.post(
            self.url, data=self.bodies[i % len(self.bodies)], headers=self.headers
        ) as resp:
            await resp.read()
            if resp.status != 200:
                raise SystemExit(f"{self.url} answered {resp.status}")
        return time.perf_counter() - start


async def _measure(args: argparse.Namespace, direct: Target, gateway: Target) -> dict[str, Any]:
    import aiohttp
    from tqdm import tqdm

    total = 2 * args.requests + 2 * args.rounds * args.throughput_requests + 40
    bar = tqdm(total=total, desc="bench gateway", unit="req", file=sys.stderr, disable=None)
    limit = aiohttp.TCPConnector(limit=args.concurrency)
    async with aiohttp.ClientSession(connector=limit) as session:
        for i in range(20):  # warm both paths (connections, caches, batch threads)
            await direct.call(session, i)
            await gateway.call(session, i)
            bar.update(2)
        lat: dict[str, list[float]] = {"direct": [], "gateway": []}
        for i in range(args.requests):
            lat["direct"].append(await direct.call(session, i))
            lat["gateway"].append(await gateway.call(session, i))
            bar.update(2)
        elapsed = {"direct": 0.0, "gateway": 0.0}
        for _ in range(args.rounds):
            for name, target in (("direct", direct), ("gateway", gateway)):
                counter = iter(range(args.throughput_requests))

                async def worker(t: Target = target, it: Iterator[int] = counter) -> None:
                    for i in it:
                        await t.call(session, i)
                        bar.update(1)

                start = time.perf_counter()
                await asyncio.gather(*(worker() for _ in range(args.concurrency)))
                elapsed[name] += time.perf_counter() - start
    bar.close()
    n = args.rounds * args.throughput_requests
    rps = {k: n / v for k, v in elapsed.items()}
    out: dict[str, Any] = {}
    for name in ("direct", "gateway"):
        out[f"{name}_p50_ms"] = 1000 * statistics.median(lat[name])
        out[f"{name}_p99_ms"] = 1000 * percentile(lat[name], 99)
        out[f"{name}_rps_c{args.concurrency}"] = rps[name]
    out["added_p50_ms"] = out["gateway_p50_ms"] - out["direct_p50_ms"]
    out["added_p99_ms"] = out["gateway_p99_ms"] - out["direct_p99_ms"]
    out["throughput_ratio"] = rps["gateway"] / rps["direct"]
    return out


def _internal_ms(url: str) -> float:
    """Mean time a successful request spent in the gateway itself (total minus upstream)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    sums: dict[str, float] = {"total": 0.0, "upstream": 0.0, "count": 0.0}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if (
            name.startswith("tokenpulse_gateway_request_duration_seconds_sum")
            and 'code="200"' in name
        ):
            sums["total"] += float(value)
        elif name.startswith("tokenpulse_gateway_request_duration_seconds_count") and (
            'code="200"' in name
        ):
            sums["count"] += float(value)
        elif name.startswith("tokenpulse_gateway_upstream_duration_seconds_sum"):
            sums["upstream"] += float(value)
    return 1000 * (sums["total"] - sums["upstream"]) / max(sums["count"], 1.0)


def _run(args: argparse.Namespace, upstream: str, cpus: set[int] | None = None) -> dict[str, Any]:
    from serving.gateway.keys import add_key

    versions = available_versions(upstream, args.model_name)
    if not versions:
        raise SystemExit(f"{upstream} has no AVAILABLE version of {args.model_name!r}")
    version = max(versions)
    with tempfile.TemporaryDirectory(prefix="tp-bench-gw-") as tmp:
        keys = Path(tmp) / "keys.json"
        key = add_key(keys, "bench", requests_per_minute=1e9, tokens_per_minute=1e12)
        with running_gateway(
            upstream, keys, models=[args.model_name], max_concurrency=max(64, args.concurrency)
        ) as gw:
            if cpus:  # the model server keeps the other CPUs to itself in both phases
                pin(gw.pid, cpus)
                pin(os.getpid(), cpus)
            row = default_row
            direct = Target(
                f"{upstream}{predict_path(args.model_name, version)}",
                {"Content-Type": "application/json"},
                lambda p: row_request([row(p, args.max_new_tokens)], SIGNATURE_NAME),
            )
            through = Target(
                f"{gw.url}/v1/generate",
                {"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
                lambda p: {**row(p, args.max_new_tokens), "model": args.model_name},
            )
            result = asyncio.run(_measure(args, direct, through))
            result["gateway_internal_ms_mean"] = _internal_ms(gw.url)
            result["gateway_startup_s"] = gw.started_in_s
            result["gateway_rss_mb"] = rss_bytes(gw.pid)[0] / 1e6
    result.update(
        model=args.model_name, version=version, max_new_tokens=args.max_new_tokens,
        requests_c1=args.requests, concurrency=args.concurrency,
        throughput_requests=args.rounds * args.throughput_requests,
    )  # fmt: skip
    return result


def _report(r: dict[str, Any]) -> None:
    c = r["concurrency"]
    ok = {
        "added p50 <= 2 ms": r["added_p50_ms"] <= 2.0,
        "throughput >= 95% of direct": r["throughput_ratio"] >= 0.95,
        "start-up < 2 s": r["gateway_startup_s"] < 2.0,
        "RSS < 150 MB": r["gateway_rss_mb"] < 150,
    }
    print(f"model {r['model']} v{r['version']}, max_new_tokens={r['max_new_tokens']}")
    print(f"CPU isolation: {r['cpu_isolation']}")
    print(f"{'':24}{'direct':>10}{'gateway':>10}{'added':>10}")
    for q in ("p50", "p99"):
        d, g = r[f"direct_{q}_ms"], r[f"gateway_{q}_ms"]
        print(f"{q + ' ms (c=1)':24}{d:10.2f}{g:10.2f}{g - d:10.2f}")
    d, g = r[f"direct_rps_c{c}"], r[f"gateway_rps_c{c}"]
    print(f"{f'req/s (c={c})':24}{d:10.1f}{g:10.1f}{'ratio ' + format(g / d, '.3f'):>16}")
    print(
        f"time inside the gateway (mean, from its metrics) {r['gateway_internal_ms_mean']:.3f} ms"
    )
    print(f"gateway start-up {r['gateway_startup_s']:.2f} s, RSS {r['gateway_rss_mb']:.0f} MB")
    for name, passed in ok.items():
        print(f"  {'PASS' if passed else 'MISS'}  {name}")


def main(args: argparse.Namespace) -> int:
    """Run the bench and print the figures."""
    split = cpu_split() if args.isolate_cpus and not args.upstream else None
    try:
        if args.upstream:
            result = _run(args, args.upstream.rstrip("/"))
        else:
            with _model_server(args.model_base_path, args.model_name, split and split[0]) as url:
                result = _run(args, url, split and split[1])
    except LaunchError as exc:
        print(f"bench gateway: {exc}", file=sys.stderr)
        return 1
    result["cpu_isolation"] = (
        f"model server on CPUs {sorted(split[0])}, gateway and load generator on {sorted(split[1])}"
        if split
        else "shared: the gateway's CPU comes out of the model server's"
    )
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _report(result)
    return 0
