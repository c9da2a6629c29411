"""`tokenpulse bench batching`: the model server with dynamic batching on vs off, side by side.

Starts the server twice on free loopback ports (batching off, then on, never both at once so they
do not share the cores), drives each with closed loops at several concurrencies and one open loop
at a fixed arrival rate over REST, and prints throughput, latency and on/off ratios. It also times
the signature called in-process at batch 1 against the same call through the server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from devtools.bench.harness import add_model_arguments, latency_ms, progress
from stack.launch import running_modelserver
from tokenpulse.tfserving.predict import parse_predictions, predict_path, row_request
from tokenpulse.tfserving.signature import SIGNATURE_NAME

PROMPTS = [
    "The service was",
    "Once upon a time",
    "Monitoring tells us",
    "In the morning the",
    "A model server",
    "The latency of",
    "She opened the door and",
    "Batching helps because",
]


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


@contextlib.contextmanager
def _server(args: argparse.Namespace, batching: bool) -> Iterator[str]:
    """A model server on the bench's model, batching on (with its parameters file) or off."""
    with running_modelserver(
        args.model_base_path,
        model_name=args.model_name,
        enable_batching=batching,
        batching_parameters_file=args.batching_parameters_file if batching else None,
        file_system_poll_wait_seconds=0,
        extra_args=["--log_level=WARNING"],
        env={"TF_CPP_MIN_LOG_LEVEL": "3"},
        start_timeout_s=180,
        stop_timeout_s=30,
    ) as server:
        yield server.rest_url


def _row(i: int, max_new_tokens: int) -> dict[str, Any]:
    from tokenpulse.tfserving.signature import default_row

    return default_row(PROMPTS[i % len(PROMPTS)], max_new_tokens)


async def _one(session: Any, url: str, body: bytes) -> tuple[float, int, bool]:
    start = time.perf_counter()
    try:
        async with session.post(url, data=body) as resp:
            doc = await resp.read()
            ok = resp.status == 200
    except Exception:  # a failed request is counted, not fatal
        return time.perf_counter() - start, 0, False
    tokens = parse_predictions(json.loads(doc), 1)[0]["output_tokens"] if ok else 0
    return time.perf_counter() - start, tokens, ok


def _summarise(
    mode: str,
    batching: bool,
    conc: int | None,
    rate: float | None,
    samples: list[tuple[float, int, bool]],
    seconds: float,
) -> LoadResult:
    ok_s = [s[0] for s in samples if s[2]]
    ok = len(ok_s)
    tokens = sum(s[1] for s in samples)
    lat = latency_ms(ok_s)
    return LoadResult(
        mode,
        batching,
        conc,
        rate,
        len(samples),
        len(samples) - ok,
        seconds,
        ok / seconds,
        tokens / seconds,
        lat["mean_ms"],
        lat["p50_ms"],
        lat["p99_ms"],
    )


async def _closed(url: str, args: argparse.Namespace, conc: int, batching: bool) -> LoadResult:
    import aiohttp

    target = f"{url}{predict_path(args.model_name)}"
    samples: list[tuple[float, int, bool]] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        # one untimed round so connections and caches are warm
        await asyncio.gather(*[_one(session, target, _body(i, args)) for i in range(conc)])
        end = time.perf_counter() + args.duration
        start = time.perf_counter()

        async def worker(w: int) -> None:
            i = w
            while time.perf_counter() < end:
                samples.append(await _one(session, target, _body(i, args)))
                i += conc

        await asyncio.gather(*[worker(w) for w in range(conc)])
        seconds = time.perf_counter() - start
    return _summarise("closed", batching, conc, None, samples, seconds)


async def _open(url: str, args: argparse.Namespace, rate: float, batching: bool) -> LoadResult:
    import aiohttp

    target = f"{url}{predict_path(args.model_name)}"
    tasks = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        start = time.perf_counter()
        n = max(1, int(rate * args.duration))
        for i in range(n):
            # fixed arrival schedule: latency counts from the scheduled send time
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(_one(session, target, _body(i, args))))
        samples = list(await asyncio.gather(*tasks))
        seconds = max(time.perf_counter() - start, args.duration)
    return _summarise("open", batching, None, rate, samples, seconds)


def _body(i: int, args: argparse.Namespace) -> bytes:
    return json.dumps(row_request([_row(i, args.max_new_tokens)])).encode()


class InProcess:
    """The newest version's signature loaded in this process: the overhead baseline."""

    def __init__(self, args: argparse.Namespace) -> None:
        import tensorflow as tf

        from serving.modelserver.manager import list_versions

        path = args.model_base_path / str(list_versions(args.model_base_path)[-1])
        self._tf = tf
        self._fn = tf.saved_model.load(str(path)).signatures[SIGNATURE_NAME]
        self._args = args

    def call_s(self, i: int) -> float:
        """Seconds for one batch-1 call, inputs built and outputs fetched as the server does."""
        tf = self._tf
        row = _row(i, self._args.max_new_tokens)
        start = time.perf_counter()
        out = self._fn(
            prompt=tf.constant([row["prompt"]]),
            max_new_tokens=tf.constant([row["max_new_tokens"]], tf.int32),
            temperature=tf.constant([row["temperature"]], tf.float32),
            top_k=tf.constant([row["top_k"]], tf.int32),
            top_p=tf.constant([row["top_p"]], tf.float32),
            seed=tf.constant([row["seed"]], tf.int64),
        )
        _ = {k: v.numpy() for k, v in out.items()}
        return time.perf_counter() - start


async def _paired_ms(url: str, args: argparse.Namespace, local: InProcess) -> dict[str, float]:
    """Alternate in-process and server calls (never both at once), so drifting background
    load on the host hits both sides alike."""
    import aiohttp

    target = f"{url}{predict_path(args.model_name)}"
    local_s: list[float] = []
    server_s: list[float] = []
    async with aiohttp.ClientSession() as session:
        for i in range(3):
            local.call_s(i)
            await _one(session, target, _body(i, args))
        for i in range(args.overhead_calls):
            local_s.append(local.call_s(i))
            server_s.append((await _one(session, target, _body(i, args)))[0])
    return {
        "in_process_mean_ms": statistics.fmean(local_s) * 1000,
        "server_mean_ms": statistics.fmean(server_s) * 1000,
        "in_process_p50_ms": statistics.median(local_s) * 1000,
        "server_p50_ms": statistics.median(server_s) * 1000,
    }


def main(args: argparse.Namespace) -> int:
    """Run every level against both servers and report."""
    if not args.model_base_path.is_dir():
        print(
            f"no model at {args.model_base_path}; build one (`make model`) or pass "
            "--model-base-path",
            file=sys.stderr,
        )
        return 2
    levels = [int(c) for c in args.concurrency.split(",") if c]
    _progress("loading the signature in-process (batch-1 baseline)")
    local = InProcess(args)
    results: list[LoadResult] = []
    overhead: dict[str, dict[str, float]] = {}
    rate = args.rate
    for batching in (False, True):
        label = "on" if batching else "off"
        _progress(f"starting model server, batching {label}")
        with _server(args, batching) as url:
            _progress(f"batching {label}: {args.overhead_calls} batch-1 calls, paired in-process")
            overhead[f"batching_{label}"] = asyncio.run(_paired_ms(url, args, local))
            for conc in levels:
                _progress(f"batching {label}: closed loop, concurrency {conc}, {args.duration:g}s")
                results.append(asyncio.run(_closed(url, args, conc, batching)))
            if rate <= 0:
                base = next((r for r in results if r.concurrency == 1 and not r.batching), None)
                rate = round(2 * base.requests_per_s, 2) if base else 10.0
            _progress(f"batching {label}: open loop at {rate:g} req/s, {args.duration:g}s")
            results.append(asyncio.run(_open(url, args, rate, batching)))
    report = _report(results, overhead)
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
