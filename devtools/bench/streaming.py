"""`tokenpulse bench streaming`: streamed (SSE) against unary generation through the gateway.

One model server with batching on and one gateway in front of it (streams call `continue` in
chunks of the gateway's `stream_chunk_tokens` after a first one of `stream_first_chunk_tokens`,
defaults DEFAULT_STREAM_CHUNK and DEFAULT_STREAM_FIRST_CHUNK). The same requests
(same prompts and seeds) run unary and streamed over `/v1/generate`, the modes alternating round
by round so drift on the host hits both alike. Three figures, each against its target:

- c=1: time to first token (first text event) p50 and p99 of streams against the unary latency
  for the same 64 new tokens (target: TTFT p50 <= 0.3x unary p50);
- c=32: streamed tokens/s against unary tokens/s (target >= 0.8x);
- c=32: the model server's mean processed batch while streaming (target >= 24 of 32), read from
  its own `processed_batch_size` histogram.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools.bench.harness import (
    LIMITS,
    Tally,
    add_model_arguments,
    bench_modelserver,
    generator_line,
    model_missing,
    progress,
)
from stack.launch import running_gateway
from stack.loadtest.client import Client, NativeRoute, NativeStreamRoute
from stack.loadtest.engine import Recording, closed_loop, health
from stack.loadtest.prom import batch_totals
from stack.loadtest.stats import quantile
from stack.loadtest.workload import Cycle
from tokenpulse.tfserving.signature import DEFAULT_STREAM_CHUNK, DEFAULT_STREAM_FIRST_CHUNK

TARGETS = {"ttft_ratio": 0.3, "throughput_ratio": 0.8, "mean_batch": 24.0}
QUICK = {"low": 1, "high": 4, "duration": 1.0, "rounds": 1, "max_new_tokens": 8}
MODES = ("unary", "stream")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Bench options; every phase is bounded by --duration."""
    add_model_arguments(parser)
    parser.add_argument("--low", type=int, default=1, help="concurrency of the TTFT phase")
    parser.add_argument("--high", type=int, default=32, help="concurrency of the batch phase")
    parser.add_argument("--duration", type=float, default=12.0, help="seconds per mode per level")
    parser.add_argument("--rounds", type=int, default=2, help="turns per level (modes alternate)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.8, help="0: greedy")
    parser.add_argument(
        "--chunk", type=int, default=DEFAULT_STREAM_CHUNK, help="the gateway's stream_chunk_tokens"
    )
    parser.add_argument(
        "--first-chunk",
        type=int,
        default=DEFAULT_STREAM_FIRST_CHUNK,
        help="the gateway's stream_first_chunk_tokens (0: --chunk)",
    )
    parser.add_argument(
        "--stream-batch-rows",
        type=int,
        default=None,
        help="the gateway's stream_batch_rows (default: the gateway's; 0: no coalescing)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a few seconds: c=1 and 4, 8 tokens (tests)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")


@dataclass
class Result(Tally):
    """One mode at one concurrency."""

    mode: str
    concurrency: int

    def summary(self) -> dict[str, Any]:
        """The figures of this mode and level."""

        def ms(values: list[float], q: float) -> float | None:
            value = quantile(values, q / 100)
            return None if value is None else round(1000 * value, 2)

        return {
            "mode": self.mode,
            "concurrency": self.concurrency,
            "requests": self.requests,
            "errors": self.errors,
            "tokens_per_s": round(self.tokens / self.seconds, 1) if self.seconds else 0.0,
            "mean_batch": None if self.mean_batch is None else round(self.mean_batch, 2),
            "first_p50_ms": ms(self.first_s, 50),
            "first_p99_ms": ms(self.first_s, 99),
            "total_p50_ms": ms(self.total_s, 50),
        }


async def _phase(
    url: str, key: str, model: str, stream: bool, conc: int, seconds: float,
    args: argparse.Namespace, first: int,
) -> Recording:  # fmt: skip
    """Closed loop: `conc` workers running whole requests back to back for `seconds`."""
    route = (NativeStreamRoute if stream else NativeRoute)(model)
    requests_from = Cycle(args.max_new_tokens, args.temperature, first)
    async with Client(url, route, [key], timeout_s=120) as client:
        return await closed_loop(client, requests_from, conc, seconds, limits=LIMITS,
                                 progress=None)  # fmt: skip


def measure(
    url: str, key: str, metrics_url: str, args: argparse.Namespace, recordings: list[Recording]
) -> list[Result]:
    """Both modes at both levels, alternating round by round."""
    say = progress("streaming")
    results: list[Result] = []
    for conc in (args.low, args.high):
        level = {m: Result(m, conc) for m in MODES}
        say(f"c={conc}: warming up")
        warm = min(args.duration, 2.0)
        asyncio.run(_phase(url, key, args.model_name, True, conc, warm, args, 900_000))
        for r in range(max(1, args.rounds)):
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                share = args.duration / max(1, args.rounds)
                say(f"c={conc} round {r + 1}: {mode}, {share:g}s")
                before = batch_totals(metrics_url)
                rec = asyncio.run(_phase(
                    url, key, args.model_name, mode == "stream", conc, share, args, r * 100_000
                ))  # fmt: skip
                after = batch_totals(metrics_url)
                level[mode].add(rec, (after[0] - before[0], after[1] - before[1]))
                recordings.append(rec)
        results += level.values()
    return results


def report(
    results: list[Result], args: argparse.Namespace, recordings: list[Recording] | None = None
) -> dict[str, Any]:
    """The rows and the three figures against their targets."""
    rows = [r.summary() for r in results]
    at = {(r["mode"], r["concurrency"]): r for r in rows}
    low_s, low_u = at[("stream", args.low)], at[("unary", args.low)]
    high_s, high_u = at[("stream", args.high)], at[("unary", args.high)]

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a is not None and b else None

    figures = {
        "ttft_p50_ms": low_s["first_p50_ms"],
        "ttft_p99_ms": low_s["first_p99_ms"],
        "unary_p50_ms": low_u["total_p50_ms"],
        "ttft_ratio": ratio(low_s["first_p50_ms"], low_u["total_p50_ms"]),
        "throughput_ratio": ratio(high_s["tokens_per_s"], high_u["tokens_per_s"]),
        "mean_batch": high_s["mean_batch"],
        "mean_batch_unary": high_u["mean_batch"],
    }
    met = {
        "ttft_ratio": figures["ttft_ratio"] is not None
        and figures["ttft_ratio"] <= TARGETS["ttft_ratio"],
        "throughput_ratio": figures["throughput_ratio"] is not None
        and figures["throughput_ratio"] >= TARGETS["throughput_ratio"],
        "mean_batch": figures["mean_batch"] is not None
        and figures["mean_batch"] >= TARGETS["mean_batch"] * args.high / 32,
    }
    return {
        "chunk": args.chunk,
        "first_chunk": args.first_chunk or args.chunk,
        "stream_batch_rows": args.stream_batch_rows,
        "max_new_tokens": args.max_new_tokens,
        "low": args.low,
        "high": args.high,
        "rows": rows,
        "figures": figures,
        "targets": TARGETS,
        "met": met,
        "generator": health(recordings or []),
    }


def _print(doc: dict[str, Any]) -> None:
    print(f"chunks: first {doc['first_chunk']} tokens, then {doc['chunk']}; "
          f"{doc['max_new_tokens']} new tokens per request")  # fmt: skip
    print(f"{'mode':>7} {'c':>3} {'req':>6} {'err':>4} {'tok/s':>8} {'mean batch':>10} "
          f"{'first p50 ms':>12} {'first p99 ms':>12} {'whole p50 ms':>12}")  # fmt: skip
    for r in doc["rows"]:
        cells = [r["mean_batch"], r["first_p50_ms"], r["first_p99_ms"], r["total_p50_ms"]]
        shown = ["-" if v is None else f"{v:g}" for v in cells]
        print(f"{r['mode']:>7} {r['concurrency']:>3} {r['requests']:>6} {r['errors']:>4} "
              f"{r['tokens_per_s']:>8.1f} {shown[0]:>10} {shown[1]:>12} {shown[2]:>12} "
              f"{shown[3]:>12}")  # fmt: skip
    f, t, met = doc["figures"], doc["targets"], doc["met"]
    print(f"c={doc['low']}: TTFT p50 {f['ttft_p50_ms']} ms, p99 {f['ttft_p99_ms']} ms against "
          f"unary {f['unary_p50_ms']} ms: {f['ttft_ratio']}x (target <= {t['ttft_ratio']}x, "
          f"{'met' if met['ttft_ratio'] else 'NOT met'})")  # fmt: skip
    verdict = "met" if met["throughput_ratio"] else "NOT met"
    print(f"c={doc['high']}: streamed/unary tokens/s {f['throughput_ratio']}x (target >= "
          f"{t['throughput_ratio']}x, {verdict})")  # fmt: skip
    print(f"c={doc['high']}: mean processed batch streaming {f['mean_batch']} (unary "
          f"{f['mean_batch_unary']}; target >= {t['mean_batch']:g} of 32, "
          f"{'met' if met['mean_batch'] else 'NOT met'})")  # fmt: skip
    print(generator_line(doc["generator"]))


def main(args: argparse.Namespace) -> int:
    """Start the model server (batching on) and a gateway, run both modes, report."""
    from serving.gateway.keys import add_key

    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    if model_missing(args):
        return 2
    say = progress("streaming")
    say("starting the model server (batching on) and the gateway")
    with (
        tempfile.TemporaryDirectory(prefix="tp-bench-stream-") as tmp,
        bench_modelserver(args) as server,
    ):  # fmt: skip
        keys = Path(tmp) / "keys.json"
        key = add_key(keys, "bench", requests_per_minute=1e9, tokens_per_minute=1e12)
        coalesce = {}
        if args.stream_batch_rows is not None:
            coalesce["stream_batch_rows"] = args.stream_batch_rows
        with running_gateway(
            server.rest_url, keys, models=[args.model_name], stream_chunk_tokens=args.chunk,
            stream_first_chunk_tokens=args.first_chunk,
            max_concurrency=max(64, 2 * args.high), access_log=False,
            max_new_tokens_limit=max(512, args.max_new_tokens), **coalesce,
        ) as gw:  # fmt: skip
            recordings: list[Recording] = []
            results = measure(gw.url, key, server.metrics_url, args, recordings)
    doc = report(results, args, recordings)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        _print(doc)
    return 0
