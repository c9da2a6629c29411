"""`tokenpulse bench batching`: the model server with dynamic batching on vs off, side by side.

Starts the server twice on free loopback ports (batching off, then on, never both at once so they
do not share the cores), drives each with closed loops at several concurrencies and one open loop
at a fixed arrival rate over REST, and prints throughput, latency and on/off ratios. It also times
the signature called in-process at batch 1 against the same call through the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from devtools.bench.harness import (
    LIMITS,
    add_model_arguments,
    bench_modelserver,
    generator,
    generator_line,
    latency_ms,
    model_missing,
    progress,
)
from stack.loadtest.arrivals import RateProfile, schedule
from stack.loadtest.client import Client, Outcome, TfServingRoute
from stack.loadtest.engine import Recording, closed_loop, open_loop
from stack.loadtest.workload import Cycle
from tokenpulse.tfserving.signature import SIGNATURE_NAME, default_row


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Bench options; every run is bounded by the durations given here."""
    add_model_arguments(parser)
    parser.add_argument("--concurrency", default="1,8,32", help="closed-loop levels")
    parser.add_argument("--duration", type=float, default=6.0, help="seconds per load level")
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="open-loop arrivals/s (0: 2x the unbatched concurrency-1 rate)",
    )
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument(
        "--overhead-calls",
        type=int,
        default=30,
        help="batch-1 calls timed in-process and through the server",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")


@dataclass
class LoadResult:
    """One load level against one server."""

    mode: str
    batching: bool
    concurrency: int | None
    rate: float | None
    requests: int
    errors: int
    seconds: float
    requests_per_s: float
    tokens_per_s: float
    mean_ms: float
    p50_ms: float
    p99_ms: float


_progress = progress("batching")


def _client(url: str, args: argparse.Namespace) -> Client:
    return Client(url, TfServingRoute(args.model_name), [], timeout_s=120)


def _summarise(
    mode: str, batching: bool, conc: int | None, rate: float | None, rec: Recording, seconds: float
) -> LoadResult:
    ok = [o for o in rec.outcomes if o.ok]
    lat = latency_ms([o.latency_s for o in ok])
    return LoadResult(
        mode,
        batching,
        conc,
        rate,
        len(rec.outcomes),
        len(rec.outcomes) - len(ok),
        seconds,
        len(ok) / seconds,
        sum(o.output_tokens for o in ok) / seconds,
        lat["mean_ms"],
        lat["p50_ms"],
        lat["p99_ms"],
    )


async def _closed(
    url: str, args: argparse.Namespace, conc: int, batching: bool, recs: list[Recording]
) -> LoadResult:
    async with _client(url, args) as client:
        # one untimed round so connections and caches are warm
        await closed_loop(client, Cycle(args.max_new_tokens, seeded=False), conc, None,
                          requests=conc, limits=LIMITS, progress=None)  # fmt: skip
        rec = await closed_loop(
            client, Cycle(args.max_new_tokens, seeded=False), conc, args.duration,
            limits=LIMITS, progress=None,
        )  # fmt: skip
    recs.append(rec)
    return _summarise("closed", batching, conc, None, rec, rec.end - rec.start)


async def _open(
    url: str, args: argparse.Namespace, rate: float, batching: bool, recs: list[Recording]
) -> LoadResult:
    # fixed arrival schedule: latency counts from the scheduled send time
    offsets = schedule(RateProfile(rate, args.duration), "constant")
    async with _client(url, args) as client:
        rec = await open_loop(
            client, Cycle(args.max_new_tokens, seeded=False), offsets, args.duration,
            limits=LIMITS, drain_s=120, progress=None,
        )  # fmt: skip
    recs.append(rec)
    return _summarise("open", batching, None, rate, rec, max(rec.end - rec.start, args.duration))


class InProcess:
    """The newest version's signature loaded in this process: the overhead baseline."""

    def __init__(self, args: argparse.Namespace) -> None:
        import tensorflow as tf

        from serving.modelserver.manager import list_versions
        from tokenpulse.tfserving.ops import load_saved_model

        path = args.model_base_path / str(list_versions(args.model_base_path)[-1])
        self._tf = tf
        self._fn = load_saved_model(path).signatures[SIGNATURE_NAME]
        self._args = args

    def call_s(self, i: int) -> float:
        """Seconds for one batch-1 call, inputs built and outputs fetched as the server does."""
        tf = self._tf
        item = Cycle(self._args.max_new_tokens, seeded=False, first=i).next()
        row = default_row(item.prompt, item.max_new_tokens)
        start = time.perf_counter()
        out = self._fn(
            prompt=tf.constant([row["prompt"]]),
            max_new_tokens=tf.constant([row["max_new_tokens"]], tf.int32),
            temperature=tf.constant([row["temperature"]], tf.float32),
            top_k=tf.constant([row["top_k"]], tf.int32),
            top_p=tf.constant([row["top_p"]], tf.float32),
            seed=tf.constant([row["seed"]], tf.int64),
            stop=tf.constant([row["stop"]], tf.string),
            ignore_eos=tf.constant([row["ignore_eos"]], tf.int32),
        )
        _ = {k: v.numpy() for k, v in out.items()}
        return time.perf_counter() - start


async def _paired_ms(url: str, args: argparse.Namespace, local: InProcess) -> dict[str, float]:
    """Alternate in-process and server calls (never both at once), so drifting background
    load on the host hits both sides alike."""
    local_s: list[float] = []
    server_s: list[float] = []
    async with _client(url, args) as client:

        async def call(i: int) -> Outcome:
            item = Cycle(args.max_new_tokens, seeded=False, first=i).next()
            return await client.send(item, time.monotonic())

        for i in range(3):
            local.call_s(i)
            await call(i)
        for i in range(args.overhead_calls):
            local_s.append(local.call_s(i))
            server_s.append((await call(i)).latency_s)
    return {
        "in_process_mean_ms": statistics.fmean(local_s) * 1000,
        "server_mean_ms": statistics.fmean(server_s) * 1000,
        "in_process_p50_ms": statistics.median(local_s) * 1000,
        "server_p50_ms": statistics.median(server_s) * 1000,
    }


def main(args: argparse.Namespace) -> int:
    """Run every level against both servers and report."""
    if model_missing(args):
        return 2
    levels = [int(c) for c in args.concurrency.split(",") if c]
    _progress("loading the signature in-process (batch-1 baseline)")
    local = InProcess(args)
    results: list[LoadResult] = []
    recs: list[Recording] = []
    overhead: dict[str, dict[str, float]] = {}
    rate = args.rate
    for batching in (False, True):
        label = "on" if batching else "off"
        _progress(f"starting model server, batching {label}")
        with bench_modelserver(args, batching) as server:
            url = server.rest_url
            _progress(f"batching {label}: {args.overhead_calls} batch-1 calls, paired in-process")
            overhead[f"batching_{label}"] = asyncio.run(_paired_ms(url, args, local))
            for conc in levels:
                _progress(f"batching {label}: closed loop, concurrency {conc}, {args.duration:g}s")
                results.append(asyncio.run(_closed(url, args, conc, batching, recs)))
            if rate <= 0:
                base = next((r for r in results if r.concurrency == 1 and not r.batching), None)
                rate = round(2 * base.requests_per_s, 2) if base else 10.0
            _progress(f"batching {label}: open loop at {rate:g} req/s, {args.duration:g}s")
            results.append(asyncio.run(_open(url, args, rate, batching, recs)))
    report = _report(results, overhead) | {"generator": generator(recs)}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)
    return 0


def _report(results: list[LoadResult], overhead: dict[str, dict[str, float]]) -> dict[str, Any]:
    ratios = []
    for on in (r for r in results if r.batching):
        off = next(
            r
            for r in results
            if not r.batching and r.mode == on.mode and r.concurrency == on.concurrency
        )
        ratios.append(
            {
                "mode": on.mode,
                "concurrency": on.concurrency,
                "rate": on.rate,
                "throughput_ratio": on.requests_per_s / off.requests_per_s
                if off.requests_per_s
                else None,
                "mean_latency_ratio": on.mean_ms / off.mean_ms if off.mean_ms else None,
                "p99_latency_ratio": on.p99_ms / off.p99_ms if off.p99_ms else None,
            }
        )
    for o in overhead.values():
        o["overhead_mean_pct"] = (o["server_mean_ms"] / o["in_process_mean_ms"] - 1) * 100
        o["overhead_p50_pct"] = (o["server_p50_ms"] / o["in_process_p50_ms"] - 1) * 100
    return {
        "results": [asdict(r) for r in results],
        "ratios_on_vs_off": ratios,
        "overhead": overhead,
    }


def _print(report: dict[str, Any]) -> None:
    print(
        f"{'batching':8} {'load':>12} {'req':>6} {'err':>4} {'req/s':>8} {'tok/s':>8} "
        f"{'mean ms':>9} {'p50 ms':>8} {'p99 ms':>8}"
    )
    for r in report["results"]:
        load = f"c={r['concurrency']}" if r["mode"] == "closed" else f"{r['rate']:g}/s open"
        print(
            f"{'on' if r['batching'] else 'off':8} {load:>12} {r['requests']:>6} {r['errors']:>4} "
            f"{r['requests_per_s']:>8.2f} {r['tokens_per_s']:>8.1f} {r['mean_ms']:>9.1f} "
            f"{r['p50_ms']:>8.1f} {r['p99_ms']:>8.1f}"
        )
    print("\non/off ratios (throughput higher is better, latency lower is better):")
    for q in report["ratios_on_vs_off"]:
        load = f"c={q['concurrency']}" if q["mode"] == "closed" else f"{q['rate']:g}/s open"
        print(
            f"  {load:>12}: throughput x{q['throughput_ratio']:.2f}  "
            f"mean latency x{q['mean_latency_ratio']:.2f}  p99 x{q['p99_latency_ratio']:.2f}"
        )
    print("\nserver overhead at batch 1 (calls alternated with the in-process signature):")
    for name, o in report["overhead"].items():
        print(
            f"  {name:13}: in-process mean {o['in_process_mean_ms']:.2f} ms, via REST "
            f"{o['server_mean_ms']:.2f} ms ({o['overhead_mean_pct']:+.1f}%); p50 "
            f"{o['in_process_p50_ms']:.2f} vs {o['server_p50_ms']:.2f} ms "
            f"({o['overhead_p50_pct']:+.1f}%)"
        )
    print(f"\n{generator_line(report['generator'])}")
