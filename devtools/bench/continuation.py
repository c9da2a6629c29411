"""`tokenpulse bench continuation`: streamed generation (`continue` chunks) against unary.

One model server, batching on. At each concurrency, closed loops run the same requests (same
prompts and seeds, so the same tokens: a stream equals its unary answer) as one unary call each
and as streams of `continue` calls of each chunk size, in turns round by round so drift on the
host hits every mode alike. Per mode: tokens/s and its ratio to unary, the mean processed batch
(the server's own `processed_batch_size` histogram), and latency to the first tokens and to the
whole answer. Each `continue` call prefills the prompt and the ids the chunks before it
returned (no KV state crosses calls), then decodes its own chunk, so the tokens/s ratio is the
price of streaming. It ends with the mode closest to issue 19's two targets (see
`choose_chunk`).

What it measured on the trained default model, and what `tokenpulse bench streaming` measured
through the gateway (which streams differently: every stream of a version in one call per chunk
step), is written once, beside the defaults, in tokenpulse/tfserving/signature.py.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
from dataclasses import dataclass
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
from stack.loadtest.client import OK, Client, Outcome, TfServingRoute
from stack.loadtest.engine import Recording, closed_loop, health
from stack.loadtest.prom import batch_totals
from stack.loadtest.stats import quantile
from stack.loadtest.workload import Cycle, Item
from tokenpulse.tfserving import signature as sig
from tokenpulse.tfserving.predict import parse_predictions, row_request

TARGET_RATIO = 0.8  # issue 19 D: streamed/unary throughput at c=32 of at least 0.8x
TTFT_TARGET = 0.3  # issue 19 D: time to first token at c=1 at most 0.3x unary latency
QUICK = {"concurrency": "1,4", "chunks": "4", "duration": 1.0, "rounds": 1, "max_new_tokens": 8}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Bench options; every phase is bounded by --duration."""
    add_model_arguments(parser)
    parser.add_argument("--concurrency", default="1,8,32", help="closed-loop levels")
    parser.add_argument(
        "--chunks",
        default="4,8,16",
        help="`continue` chunk sizes to stream with; KxG: first K, each next chunk G times larger",
    )
    parser.add_argument(
        "--duration", type=float, default=12.0, help="seconds per mode per level (all rounds)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="turns per level (modes alternate)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.8, help="0: greedy")
    parser.add_argument(
        "--quick", action="store_true", help="a few seconds: c=1,4, chunk 4, 8 tokens (tests)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")


@dataclass
class Mode:
    """One way of asking: unary (chunk 0) or streamed, the i-th chunk `chunk * growth**i` long."""

    chunk: int
    growth: int = 1

    @classmethod
    def parse(cls, spec: str) -> Mode:
        """'8' (every chunk 8 tokens) or '8x2' (8, 16, 32, ...)."""
        chunk, _, growth = spec.strip().partition("x")
        mode = cls(int(chunk), int(growth or 1))
        if mode.chunk <= 0 or mode.growth <= 0:
            raise ValueError(f"chunk spec {spec!r}: sizes must be positive")
        return mode

    @property
    def name(self) -> str:
        if not self.chunk:
            return "unary"
        return f"chunk {self.chunk}" + (f"x{self.growth}" if self.growth > 1 else "")

    def size(self, call: int) -> int:
        """Tokens the `call`-th `continue` call of a stream asks for."""
        return self.chunk * self.growth**call


@dataclass
class Result(Tally):
    """What one mode measured at one concurrency, over all its rounds."""

    mode: str
    chunk: int
    growth: int
    concurrency: int
    calls: int = 0  # `continue` (or predict) calls of the answered requests

    def summary(self) -> dict[str, Any]:
        """The figures, without the raw latencies."""

        def ms(values: list[float], q: float) -> float | None:
            value = quantile(values, q / 100)
            return None if value is None else value * 1e3

        return {
            "mode": self.mode,
            "chunk": self.chunk,
            "growth": self.growth,
            "concurrency": self.concurrency,
            "requests": self.requests,
            "errors": self.errors,
            "calls": self.calls,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
            "tokens_per_s": self.tokens / self.seconds if self.seconds else 0.0,
            "mean_batch": self.mean_batch,
            "first_p50_ms": ms(self.first_s, 50),
            "first_p99_ms": ms(self.first_s, 99),
            "total_p50_ms": ms(self.total_s, 50),
        }


class ChunkedClient(Client):
    """Asks each request in one mode: one predict (unary), or `continue` calls chunk by chunk
    until the row finishes; the outcome's `ttft_s` is the time to the first tokens."""

    def __init__(self, url: str, model: str, mode: Mode) -> None:
        super().__init__(url, TfServingRoute(model), [], timeout_s=120)
        self.mode, self.calls = mode, 0

    async def send(self, item: Item, intended: float) -> Outcome:
        if not self.mode.chunk:
            out = await super().send(item, intended)
            if out.ok:
                self.calls += 1
                out.ttft_s = out.done - out.sent  # unary's first tokens are its answer
            return out
        sent = time.monotonic()
        row = self.route.body(item)["instances"][0]
        generated, calls, first = b"", 0, None
        ids: tuple[int, ...] = ()
        try:
            while True:
                body = row | {
                    "generated": {"b64": base64.b64encode(generated).decode("ascii")},
                    "generated_ids": sig.join_ids(ids),
                    "step": len(ids),
                    "chunk": self.mode.size(calls),
                }
                request = row_request([body], sig.CONTINUE_SIGNATURE_NAME)
                url = self.base_url + self.route.path()
                async with self.session.post(url, data=json.dumps(request).encode()) as resp:
                    raw, status = await resp.read(), resp.status
                if status != 200:
                    return Outcome(intended, sent, time.monotonic(), status, str(status))
                row_out = parse_predictions(json.loads(raw), 1)[0]
                calls += 1
                first = first if first is not None else time.monotonic() - sent
                generated += bytes(row_out["tokens"][: int(row_out["n_tokens"])])
                ids += sig.parse_ids(str(row_out["token_ids"]))
                if row_out["finish_reason"] != sig.FINISH_NONE:
                    break
        except Exception:  # noqa: BLE001 - a failed request is counted, not fatal
            return Outcome(intended, sent, time.monotonic(), 0, "failed")
        self.calls += calls
        done = time.monotonic()
        return Outcome(intended, sent, done, 200, OK, output_tokens=len(ids), ttft_s=first)


async def _phase(
    url: str, metrics_url: str, mode: Mode, conc: int, seconds: float | None,
    args: argparse.Namespace, first: int, requests: int | None = None,
) -> tuple[Recording, int, tuple[float, float]]:  # fmt: skip
    """Closed loop: `conc` workers, each running whole requests back to back for `seconds` (or
    until `requests` were asked); the recording, the calls made and the batch sizes' (sum,
    count) in between."""
    before = batch_totals(metrics_url)
    requests_from = Cycle(args.max_new_tokens, args.temperature, first)
    client = ChunkedClient(url, args.model_name, mode)
    async with client:
        rec = await closed_loop(client, requests_from, conc, seconds, requests=requests,
                                limits=LIMITS, progress=None)  # fmt: skip
    after = batch_totals(metrics_url)
    return rec, client.calls, (after[0] - before[0], after[1] - before[1])


def measure(
    url: str, metrics_url: str, args: argparse.Namespace, recordings: list[Recording]
) -> list[Result]:
    """Every mode at every level, modes alternating round by round (ABC, CBA, ...)."""
    say = progress("continuation")
    levels = [int(c) for c in args.concurrency.split(",") if c]
    modes = [Mode(0)] + [Mode.parse(k) for k in args.chunks.split(",") if k.strip()]
    rounds = max(1, args.rounds)
    results: list[Result] = []
    for conc in levels:
        say(f"c={conc}: warming up")
        for mode in modes:  # one untimed request per worker and mode: batch sizes traced
            asyncio.run(_phase(url, metrics_url, mode, conc, None, args, 0, requests=conc))
        level = {m.name: Result(m.name, m.chunk, m.growth, conc) for m in modes}
        for r in range(rounds):
            for mode in modes if r % 2 == 0 else modes[::-1]:
                say(f"c={conc} round {r + 1}/{rounds}: {mode.name}, {args.duration / rounds:g}s")
                # every round starts further along the request list, the same in every mode
                rec, calls, (sizes, batches) = asyncio.run(_phase(
                    url, metrics_url, mode, conc, args.duration / rounds, args, r * 100_000,
                ))  # fmt: skip
                level[mode.name].add(rec, (sizes, batches))
                level[mode.name].calls += calls
                recordings.append(rec)
        results += level.values()
    return results


def report(results: list[Result], recordings: list[Recording] | None = None) -> dict[str, Any]:
    """Figures per mode and level, ratios to unary at the same level, and the chosen chunk."""
    rows = [r.summary() for r in results]
    for row in rows:
        unary = next(u for u in rows if u["chunk"] == 0 and u["concurrency"] == row["concurrency"])
        base = unary["tokens_per_s"]
        row["tokens_per_s_vs_unary"] = row["tokens_per_s"] / base if base else None
        first = unary["first_p50_ms"]
        row["first_p50_vs_unary"] = (
            row["first_p50_ms"] / first if first and row["first_p50_ms"] is not None else None
        )
    return {
        "results": rows,
        "chosen_chunk": choose_chunk(rows),
        "current": sig.DEFAULT_STREAM_CHUNK,
        "generator": health(recordings or []),
    }


def choose_chunk(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The streamed mode closest to both of issue 19's targets: throughput at the top level of
    at least TARGET_RATIO x unary, first tokens at the lowest level within TTFT_TARGET x unary.

    A mode meeting both wins (the smallest first chunk); else the one whose larger shortfall,
    each relative to its target, is smallest: neither side is given up for the other.
    """
    levels = sorted({r["concurrency"] for r in rows})
    if not levels:
        return None
    low, top = levels[0], levels[-1]
    scores = []
    for r in rows:
        if not r["chunk"] or r["concurrency"] != top:
            continue
        first = next(x for x in rows if x["mode"] == r["mode"] and x["concurrency"] == low)[
            "first_p50_vs_unary"
        ]
        short_tput = max(0.0, TARGET_RATIO - (r["tokens_per_s_vs_unary"] or 0)) / TARGET_RATIO
        short_ttft = max(0.0, (first if first is not None else 1.0) - TTFT_TARGET) / TTFT_TARGET
        scores.append((max(short_tput, short_ttft), r["chunk"], r["growth"], r, first))
    if not scores:
        return None
    shortfall, _, _, pick, first = min(scores, key=lambda s: s[:3])
    return {
        "mode": pick["mode"],
        "chunk": pick["chunk"],
        "growth": pick["growth"],
        "concurrency": top,
        "tokens_per_s_vs_unary": pick["tokens_per_s_vs_unary"],
        "first_concurrency": low,
        "first_p50_vs_unary": first,
        "shortfall": round(shortfall, 3),
    }


def _print(doc: dict[str, Any]) -> None:
    print(
        f"{'c':>3} {'mode':>9} {'req':>5} {'err':>4} {'calls':>6} {'tok/s':>8} {'x unary':>8} "
        f"{'mean batch':>10} {'first p50 ms':>12} {'x unary':>8} {'whole p50 ms':>12}"
    )
    fmt = lambda v, spec: format(v, spec) if v is not None else "-"  # noqa: E731
    for r in doc["results"]:
        print(
            f"{r['concurrency']:>3} {r['mode']:>9} {r['requests']:>5} {r['errors']:>4} "
            f"{r['calls']:>6} {r['tokens_per_s']:>8.1f} {fmt(r['tokens_per_s_vs_unary'], '>8.2f')} "
            f"{fmt(r['mean_batch'], '>10.1f')} {fmt(r['first_p50_ms'], '>12.1f')} "
            f"{fmt(r['first_p50_vs_unary'], '>8.2f')} {fmt(r['total_p50_ms'], '>12.1f')}"
        )
    chosen = doc["chosen_chunk"]
    if chosen:
        print(
            f"\nclosest to the targets (tokens/s >= {TARGET_RATIO}x unary at "
            f"c={chosen['concurrency']}, first tokens <= {TTFT_TARGET}x unary at "
            f"c={chosen['first_concurrency']}): {chosen['mode']} "
            f"({chosen['tokens_per_s_vs_unary']:.2f}x, {chosen['first_p50_vs_unary']:.2f}x; "
            f"shortfall {chosen['shortfall']:.0%}); DEFAULT_STREAM_CHUNK is {doc['current']}"
        )
    print(generator_line(doc["generator"]))


def main(args: argparse.Namespace) -> int:
    """Start the model server with batching on, run every mode at every level, report."""
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    if model_missing(args):
        return 2
    progress("continuation")("starting the model server, batching on")
    with bench_modelserver(args) as server:
        recordings: list[Recording] = []
        results = measure(server.rest_url, server.metrics_url, args, recordings)
    doc = report(results, recordings)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        _print(doc)
    return 0
