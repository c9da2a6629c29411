"""`tokenpulse bench bodies`: what one large predict body costs the model server.

Starts a model server (batching with the shipped parameters, as `make up` runs it), reads its RSS,
sends one predict body of `--body-mb` megabytes (`instances` rows, the shape a client batching
too much would send) while a prober asks for the model status every few milliseconds, then reads
RSS again. Prints the large request's status and time, the prober's latencies while it was in
flight (how long the server stalled), and RSS before, at peak and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from devtools.bench.harness import add_model_arguments, latency_ms, progress, rss_bytes
from stack.launch import running_modelserver

MB = 1024 * 1024
_progress = progress("bodies")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Bench options."""
    add_model_arguments(parser)
    parser.add_argument("--body-mb", type=float, default=50.0, help="size of the large body")
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=None,
        help="the server's --rest_api_max_body_bytes (default: the server's own default)",
    )
    parser.add_argument("--settle-s", type=float, default=2.0, help="wait before the last RSS")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def large_body(megabytes: float) -> bytes:
    """A predict body of about `megabytes` MB made of ordinary rows."""
    from tokenpulse.tfserving.signature import default_row

    row = json.dumps(default_row("The latency of a model server is", 4))
    count = max(1, int(megabytes * MB) // (len(row) + 2))
    return b'{"instances": [' + ", ".join([row] * count).encode() + b"]}"


async def _probe(session: Any, url: str, stop: asyncio.Event, out: list[float]) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        async with session.get(url) as resp:
            await resp.read()
        out.append(time.perf_counter() - start)
        await asyncio.sleep(0.01)


async def _measure(rest_url: str, model: str, body: bytes) -> dict[str, Any]:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=600)
    probes: list[float] = []
    async with aiohttp.ClientSession(timeout=timeout) as session:
        stop = asyncio.Event()
        prober = asyncio.create_task(_probe(session, f"{rest_url}/v1/models/{model}", stop, probes))
        start = time.perf_counter()
        async with session.post(f"{rest_url}/v1/models/{model}:predict", data=body) as resp:
            answer = await resp.read()
            status = resp.status
        seconds = time.perf_counter() - start
        stop.set()
        await prober
    try:
        error = json.loads(answer).get("error", "")
    except ValueError:
        error = answer[:200].decode(errors="replace")
    return {
        "status": status,
        "error": error[:160],
        "seconds": seconds,
        "probes": len(probes),
        "probe": latency_ms(probes),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the server, send the body, read RSS; the figures as a dict."""
    body = large_body(args.body_mb)
    extra = ["--log_level=WARNING"]
    if args.max_body_bytes is not None:
        extra.append(f"--rest_api_max_body_bytes={args.max_body_bytes}")
    _progress(f"starting the model server on {args.model_base_path}")
    with running_modelserver(
        args.model_base_path,
        model_name=args.model_name,
        batching_parameters_file=args.batching_parameters_file,
        file_system_poll_wait_seconds=0,
        extra_args=extra,
        env={"TF_CPP_MIN_LOG_LEVEL": "3"},
        start_timeout_s=180,
        stop_timeout_s=30,
    ) as server:
        rss_before, _ = rss_bytes(server.pid)
        _progress(f"sending a {len(body) / MB:.1f} MB body")
        result = asyncio.run(_measure(server.rest_url, args.model_name, body))
        _, rss_peak = rss_bytes(server.pid)
        time.sleep(args.settle_s)
        rss_after, _ = rss_bytes(server.pid)
    return {
        "body_mb": round(len(body) / MB, 1),
        **result,
        "rss_before_mb": round(rss_before / MB),
        "rss_peak_mb": round(rss_peak / MB),
        "rss_after_mb": round(rss_after / MB),
        "rss_kept_mb": round((rss_after - rss_before) / MB),
    }


def main(args: argparse.Namespace) -> int:
    """Run and print."""
    figures = run(args)
    if args.json:
        sys.stdout.write(json.dumps(figures, indent=2) + "\n")
        return 0
    probe = figures["probe"]
    lines = [
        f"large body        {figures['body_mb']} MB -> HTTP {figures['status']} "
        f"in {figures['seconds']:.2f} s {figures['error']}",
        f"status probes     {figures['probes']} while it ran: p50 {probe['p50_ms']:.1f} ms, "
        f"p99 {probe['p99_ms']:.1f} ms, max {probe['max_ms']:.1f} ms",
        f"server RSS        before {figures['rss_before_mb']} MB, "
        f"peak {figures['rss_peak_mb']} MB, after {figures['rss_after_mb']} MB "
        f"(kept {figures['rss_kept_mb']} MB)",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
