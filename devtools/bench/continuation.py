"""`tokenpulse bench continuation`: streamed generation (`continue` chunks) against unary.

One model server, batching on. At each concurrency, closed loops run the same requests (same
prompts and seeds, so the same tokens: a stream equals its unary answer) as one unary call each
and as streams of `continue` calls of each chunk size, in turns round by round so drift on the
host hits every mode alike. Per mode: tokens/s and its ratio to unary, the mean processed batch
(the server's own `processed_batch_size` histogram), and latency to the first tokens and to the
whole answer. Each `continue` call re-prefills the prompt and what came before (no KV state
crosses calls), so the tokens/s ratio is the price of streaming. It ends with the mode closest
to issue 19's two targets (see `choose_chunk`), which set DEFAULT_STREAM_CHUNK to 16.

Measured here (default-preset shapes, untrained weights, 64 new tokens at temperature 0.8, two
shared cores under a load average of 8-14; four runs): at c=32 unary made 2656-3313 tokens/s
with a mean batch of 14.6-15.4 of 32; chunk 16 made 0.55-0.73x that and chunk 8 0.42-0.46x,
chunk 32 (two calls per request) 0.96-1.02x. Streaming does not raise the mean batch (11.0-15.5
in every mode): with one batch thread a batch's rows come back together and queue while the
other half runs, so two cohorts alternate at chunk boundaries as they do between requests.
First tokens at c=1 came at 0.21-0.22x of unary latency with chunk 8, 0.31-0.35x with 16.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import re
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from devtools.bench.harness import add_model_arguments, percentile, progress
from stack.launch import running_modelserver
from tokenpulse.tfserving import signature as sig
from tokenpulse.tfserving.predict import parse_predictions, predict_path, row_request

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
BATCH = ":tensorflow:serving:batching_session:processed_batch_size"
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
class Result:
    """What one mode measured at one concurrency, over all its rounds."""

    mode: str
    chunk: int
    growth: int
    concurrency: int
    requests: int = 0
    errors: int = 0
    calls: int = 0
    tokens: int = 0
    seconds: float = 0.0
    batch_sum: float = 0.0
    batch_count: float = 0.0
    first_s: list[float] = field(default_factory=list)
    total_s: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The figures, without the raw latencies."""
        ms = lambda xs, q: percentile(xs, q) * 1e3 if xs else None  # noqa: E731
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
            "mean_batch": self.batch_sum / self.batch_count if self.batch_count else None,
            "first_p50_ms": ms(self.first_s, 50),
            "first_p99_ms": ms(self.first_s, 99),
            "total_p50_ms": ms(self.total_s, 50),
        }


def _batch_totals(metrics_url: str) -> tuple[float, float]:
    """(sum, count) of the server's processed batch sizes so far."""
    with urllib.request.urlopen(metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    out = []
    for suffix in ("_sum", "_count"):
        values = re.findall(rf"^{re.escape(BATCH + suffix)}(?:{{[^}}]*}})? (\S+)$", text, re.M)
        out.append(sum(float(v) for v in values))
    return out[0], out[1]


def _request(i: int, args: argparse.Namespace) -> dict[str, Any]:
    """The i-th request: the same in every mode, so every mode generates the same tokens."""
    row = sig.default_row(PROMPTS[i % len(PROMPTS)], args.max_new_tokens)
    return row | {"temperature": args.temperature, "seed": i}


async def _post(session: Any, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with session.post(url, data=json.dumps(body).encode()) as resp:
        doc = await resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{resp.status}: {doc[:200]!r}")
    return parse_predictions(json.loads(doc), 1)[0]


async def _unary(session: Any, url: str, row: dict[str, Any]) -> tuple[int, int, float]:
    """(tokens, calls, seconds to the first tokens) of one unary request."""
    start = time.perf_counter()
    out = await _post(session, url, row_request([row]))
    return int(out["output_tokens"]), 1, time.perf_counter() - start


async def _streamed(
    session: Any, url: str, row: dict[str, Any], mode: Mode
) -> tuple[int, int, float]:
    """(tokens, calls, seconds to the first chunk) of one request streamed in chunks."""
    start = time.perf_counter()
    generated, calls, first = b"", 0, 0.0
    while True:
        body = row | {
            "generated": {"b64": base64.b64encode(generated).decode("ascii")},
            "step": len(generated),
            "chunk": mode.size(calls),
        }
        out = await _post(session, url, row_request([body], sig.CONTINUE_SIGNATURE_NAME))
        calls += 1
        first = first or time.perf_counter() - start
        generated += bytes(out["tokens"][: int(out["n_tokens"])])
        if out["finish_reason"] != sig.FINISH_NONE:
            return len(generated), calls, first


async def _phase(
    url: str, metrics_url: str, mode: Mode, conc: int, seconds: float, args: argparse.Namespace,
    result: Result, offset: int,
) -> None:  # fmt: skip
    """Closed loop: `conc` workers, each running whole requests back to back for `seconds`."""
    import aiohttp

    target = f"{url}{predict_path(args.model_name)}"
    before = _batch_totals(metrics_url)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        start = time.perf_counter()
        end = start + seconds

        async def worker(w: int) -> None:
            i = offset + w
            while time.perf_counter() < end:
                row = _request(i, args)
                began = time.perf_counter()
                try:
                    if mode.chunk:
                        tokens, calls, first = await _streamed(session, target, row, mode)
                    else:
                        tokens, calls, first = await _unary(session, target, row)
                except Exception:  # a failed request is counted, not fatal
                    result.errors += 1
                    continue
                finally:
                    i += conc
                result.requests += 1
                result.calls += calls
                result.tokens += tokens
                result.first_s.append(first)
                result.total_s.append(time.perf_counter() - began)

        await asyncio.gather(*[worker(w) for w in range(conc)])
        result.seconds += time.perf_counter() - start
    after = _batch_totals(metrics_url)
    result.batch_sum += after[0] - before[0]
    result.batch_count += after[1] - before[1]


async def _warm(url: str, conc: int, modes: list[Mode], args: argparse.Namespace) -> None:
    """One untimed request per worker and mode: connections open, batch sizes traced."""
    import aiohttp

    target = f"{url}{predict_path(args.model_name)}"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        for mode in modes:
            calls = [
                _streamed(session, target, _request(w, args), mode)
                if mode.chunk
                else _unary(session, target, _request(w, args))
                for w in range(conc)
            ]
            await asyncio.gather(*calls)


def measure(url: str, metrics_url: str, args: argparse.Namespace) -> list[Result]:
    """Every mode at every level, modes alternating round by round (ABC, CBA, ...)."""
    say = progress("continuation")
    levels = [int(c) for c in args.concurrency.split(",") if c]
    modes = [Mode(0)] + [Mode.parse(k) for k in args.chunks.split(",") if k.strip()]
    rounds = max(1, args.rounds)
    results: list[Result] = []
    for conc in levels:
        say(f"c={conc}: warming up")
        asyncio.run(_warm(url, conc, modes, args))
        level = {m.name: Result(m.name, m.chunk, m.growth, conc) for m in modes}
        for r in range(rounds):
            for mode in modes if r % 2 == 0 else modes[::-1]:
                say(f"c={conc} round {r + 1}/{rounds}: {mode.name}, {args.duration / rounds:g}s")
                # every round starts further along the request list, the same in every mode
                phase = _phase(
                    url, metrics_url, mode, conc, args.duration / rounds, args, level[mode.name],
                    offset=r * 100_000,
                )  # fmt: skip
                asyncio.run(phase)
        results += level.values()
    return results


def report(results: list[Result]) -> dict[str, Any]:
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


def main(args: argparse.Namespace) -> int:
    """Start the model server with batching on, run every mode at every level, report."""
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    if not args.model_base_path.is_dir():
        print(
            f"no model at {args.model_base_path}; build one (`make model`) or pass "
            "--model-base-path",
            file=sys.stderr,
        )
        return 2
    progress("continuation")("starting the model server, batching on")
    with running_modelserver(
        args.model_base_path,
        model_name=args.model_name,
        enable_batching=True,
        batching_parameters_file=args.batching_parameters_file,
        file_system_poll_wait_seconds=0,
        extra_args=["--log_level=WARNING"],
        env={"TF_CPP_MIN_LOG_LEVEL": "3"},
        start_timeout_s=180,
        stop_timeout_s=30,
    ) as server:
        results = measure(server.rest_url, server.metrics_url, args)
    doc = report(results)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        _print(doc)
    return 0
