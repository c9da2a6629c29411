"""`tokenpulse bench gateway`: the gateway against calling the model server directly, side by side.

One run, same model server, same requests: latency at concurrency 1 (direct and gateway calls
interleaved, so drift hits both alike) and throughput at concurrency 32 (alternating phases).
Prints the gateway's added p50/p99 and its throughput ratio, plus its start-up time and RSS.
Targets: added p50 <= 1 ms, throughput >= 95% of direct, start-up < 2 s, RSS < 150 MB.

The anchor: nginx as a bare reverse proxy (one worker, upstream keep-alive, no access log) on the
gateway's CPU, measured in the same interleaved loops, when an `nginx` binary is installed
(`apt-get install nginx-light`); without one the bench says so and measures the rest.
`--profile` runs the gateway under py-spy and prints the profile's top entries (the figures of a
profiled run carry the sampler's overhead: compare them with each other, not with a plain run).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from devtools.bench import profiling
from devtools.bench.harness import (
    DEFAULT_MODEL_BASE,
    LIMITS,
    cpu_split,
    generator,
    generator_line,
    pin,
    progress,
    rss_bytes,
)
from stack.launch import (
    LaunchError,
    available_versions,
    http_ok,
    running_gateway,
    running_modelserver,
    running_process,
)
from stack.loadtest.client import Client, NativeRoute, Outcome, Route, TfServingRoute
from stack.loadtest.engine import Recording, closed_loop
from stack.loadtest.procstat import cpu_seconds
from stack.loadtest.prom import DURATION, scrape, total
from stack.loadtest.stats import quantile
from stack.loadtest.workload import Cycle
from tokenpulse import paths
from tokenpulse.procs import free_port
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

CONFIG_DIR = paths.SERVING_CONFIG
UPSTREAM = "tokenpulse_gateway_upstream_duration_seconds"


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
    parser.add_argument(
        "--nginx",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="measure nginx as a bare reverse proxy beside the gateway (default: when installed)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run the gateway under py-spy and print the profile's top entries",
    )
    parser.add_argument("--profile-top", type=int, default=15, help="entries per profile table")
    parser.add_argument(
        "--gateway-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a GatewaySettings field for the benched gateway (repeatable), e.g. access_log=false",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=VALUE[,NAME=VALUE]",
        help="also measure a gateway with these settings changed, in the same loops (repeatable; "
        "e.g. event_loop=asyncio to see what uvloop gives)",
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
    """One way to ask for a generation: direct (TF Serving REST), through a gateway or nginx."""

    def __init__(self, url: str, route: Route, keys: list[str], pid: int | None = None) -> None:
        self.client = Client(url, route, keys, timeout_s=120)
        self.pid = pid  # the process in the path, whose CPU time is read
        self.cpu_s = 0.0  # its CPU seconds during the c=N phases

    def cpu(self) -> float:
        """CPU seconds its process has used so far (0 without one)."""
        return cpu_seconds(self.pid) if self.pid else 0.0

    async def call(self, item_index: int, max_new_tokens: int) -> float:
        """Seconds of one request, asked now."""
        item = _requests(max_new_tokens, item_index).next()
        return _checked(self, [await self.client.send(item, time.monotonic())])[0]


def _requests(max_new_tokens: int, first: int = 0) -> Cycle:
    return Cycle(max_new_tokens, temperature=0.0, first=first, seeded=False)  # greedy, seed 0


def _checked(target: Target, outcomes: list[Outcome]) -> list[float]:
    """The latencies; a failed request ends the bench (every path must answer every request)."""
    failed = next((o for o in outcomes if not o.ok), None)
    if failed is not None:
        raise SystemExit(f"{target.client.base_url} answered {failed.label}")
    return [o.latency_s for o in outcomes]


async def _measure(
    args: argparse.Namespace, targets: dict[str, Target], recs: list[Recording]
) -> dict[str, Any]:
    """Every target in the same loops: c=1 calls interleaved, c=N phases alternating."""
    say = progress("gateway")
    lat: dict[str, list[float]] = {name: [] for name in targets}
    elapsed = dict.fromkeys(targets, 0.0)
    new = args.max_new_tokens
    async with contextlib.AsyncExitStack() as clients:
        for target in targets.values():
            await clients.enter_async_context(target.client)
        say(f"{len(targets)} paths: 20 warm-up calls each, then {args.requests} at c=1")
        for i in range(20):  # warm every path (connections, caches, batch threads)
            for target in targets.values():
                await target.call(i, new)
        for i in range(args.requests):
            for name, target in targets.items():
                lat[name].append(await target.call(i, new))
        for r in range(args.rounds):
            say(f"round {r + 1}/{args.rounds}: {args.throughput_requests} requests per path at "
                f"c={args.concurrency}")  # fmt: skip
            for name, target in targets.items():
                cpu = target.cpu()
                rec = await closed_loop(
                    target.client, _requests(new), args.concurrency, None,
                    requests=args.throughput_requests, limits=LIMITS, progress=None,
                )  # fmt: skip
                _checked(target, rec.outcomes)
                elapsed[name] += rec.window_s
                target.cpu_s += target.cpu() - cpu
                recs.append(rec)
    n = args.rounds * args.throughput_requests
    rps = {k: n / v for k, v in elapsed.items()}
    out: dict[str, Any] = {}
    for name in targets:
        out[f"{name}_p50_ms"] = 1000 * cast(float, quantile(lat[name], 0.5))
        out[f"{name}_p99_ms"] = 1000 * cast(float, quantile(lat[name], 0.99))
        out[f"{name}_rps_c{args.concurrency}"] = rps[name]
        out[f"{name}_cpu_us_per_request"] = 1e6 * targets[name].cpu_s / n
    for name in targets.keys() - {"direct"}:
        prefix = "" if name == "gateway" else f"{name}_"
        out[f"{prefix}added_p50_ms"] = out[f"{name}_p50_ms"] - out["direct_p50_ms"]
        out[f"{prefix}added_p99_ms"] = out[f"{name}_p99_ms"] - out["direct_p99_ms"]
        out[f"{prefix}throughput_ratio"] = rps[name] / rps["direct"]
    return out


NGINX_CONF = """worker_processes 1;
master_process off;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    upstream tfserving {{ server {upstream}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port} reuseport;
        keepalive_requests 100000;
        location / {{
            proxy_pass http://tfserving;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"""


def nginx_binary() -> str | None:
    """An installed nginx (PATH, then /usr/sbin), or None."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


@contextlib.contextmanager
def _nginx(upstream: str, tmp: Path) -> Iterator[tuple[str, int]]:
    """nginx as a bare reverse proxy to `upstream` (one process, so one pid to pin)."""
    exe = nginx_binary()
    if exe is None:
        raise LaunchError("nginx is not installed")
    port = free_port()
    host = upstream.removeprefix("http://").removeprefix("https://")
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX_CONF.format(tmp=tmp, upstream=host, port=port))
    url = f"http://127.0.0.1:{port}"
    with running_process(
        [exe, "-c", str(conf), "-p", str(tmp), "-e", str(tmp / "error.log")],
        lambda: http_ok(url + "/", timeout_s=0.5) or _answers(url),
        what="nginx",
        start_timeout_s=10,
    ) as proc:
        yield url, proc.pid


def _answers(url: str) -> bool:
    """Whether anything answers HTTP at `url` (the model server's 404 on / counts)."""
    try:
        with urllib.request.urlopen(url + "/", timeout=0.5):
            return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False


def _setting(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise SystemExit(f"--gateway-setting wants NAME=VALUE, got {text!r}")
    return name.strip(), value


def _internal_ms(url: str) -> float:
    """Mean time a successful request spent in the gateway itself (total minus upstream)."""
    snap = scrape(f"{url}/metrics")
    ok = {"code": "200"}
    inside = (total(snap, f"{DURATION}_sum", ok) or 0.0) - (total(snap, f"{UPSTREAM}_sum") or 0.0)
    return 1000 * inside / max(total(snap, f"{DURATION}_count", ok) or 0.0, 1.0)


def _run(args: argparse.Namespace, upstream: str, cpus: set[int] | None = None) -> dict[str, Any]:
    from serving.gateway.keys import add_key

    versions = available_versions(upstream, args.model_name)
    if not versions:
        raise SystemExit(f"{upstream} has no AVAILABLE version of {args.model_name!r}")
    version = max(versions)
    use_nginx = args.nginx if args.nginx is not None else nginx_binary() is not None
    settings: dict[str, Any] = {"models": [args.model_name]}
    settings["max_concurrency"] = max(64, args.concurrency)
    settings.update(_setting(s) for s in args.gateway_setting)
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tp-bench-gw-") as tmp, contextlib.ExitStack() as stack:
        keys = Path(tmp) / "keys.json"
        key = add_key(keys, "bench", requests_per_minute=1e9, tokens_per_minute=1e12)
        profile_out = Path(tmp) / "profile.txt"
        wrap = profiling.wrap_argv(profile_out) if args.profile else []
        gw = stack.enter_context(running_gateway(upstream, keys, wrap=wrap, **settings))
        gw_pid = profiling.wait_child(gw.pid) if args.profile else gw.pid
        if cpus:  # the model server keeps the other CPUs to itself in every phase
            pin(gw_pid, cpus)
            pin(gw.pid, cpus)  # the profiler, when there is one, samples from the same CPUs
            pin(os.getpid(), cpus)
        direct = TfServingRoute(args.model_name, version=version)
        native = NativeRoute(args.model_name)
        targets = {
            "direct": Target(upstream, direct, []),
            "gateway": Target(gw.url, native, [key], gw_pid),
        }
        for variant in args.variant:
            changed = dict(_setting(one) for one in variant.split(","))
            other = stack.enter_context(running_gateway(upstream, keys, **{**settings, **changed}))
            if cpus:
                pin(other.pid, cpus)
            targets[f"gw[{variant}]"] = Target(other.url, native, [key], other.pid)
        if use_nginx:
            nginx_dir = Path(tmp) / "nginx"
            nginx_dir.mkdir()
            nginx_url, nginx_pid = stack.enter_context(_nginx(upstream, nginx_dir))
            if cpus:
                pin(nginx_pid, cpus)
            targets["nginx"] = Target(nginx_url, direct, [], nginx_pid)
        recs: list[Recording] = []
        result.update(asyncio.run(_measure(args, targets, recs)))
        result["generator"] = generator(recs)
        result["gateway_internal_ms_mean"] = _internal_ms(gw.url)
        result["gateway_startup_s"] = gw.started_in_s
        result["gateway_rss_mb"] = rss_bytes(gw_pid)[0] / 1e6
        if args.profile:
            profiling.stop_profiled(gw.pid, gw_pid, profile_out)
            prof = profiling.parse_raw(profile_out.read_text(errors="replace"))
            result["profile"] = prof.as_dict(args.profile_top)
    result.update(
        model=args.model_name, version=version, max_new_tokens=args.max_new_tokens,
        requests_c1=args.requests, concurrency=args.concurrency,
        throughput_requests=args.rounds * args.throughput_requests,
        gateway_settings=args.gateway_setting, profiled=args.profile, variants=args.variant,
        nginx="measured" if use_nginx else (
            "not installed (apt-get install nginx-light)" if args.nginx is None else "off"
        ),
    )  # fmt: skip
    return result


def _report(r: dict[str, Any]) -> None:
    c = r["concurrency"]
    ok = {
        "added p50 <= 1 ms": r["added_p50_ms"] <= 1.0,
        "throughput >= 95% of direct": r["throughput_ratio"] >= 0.95,
        "start-up < 2 s": r["gateway_startup_s"] < 2.0,
        "RSS < 150 MB": r["gateway_rss_mb"] < 150,
    }
    names = ["direct", "gateway"] + [f"gw[{v}]" for v in r["variants"]]
    names += ["nginx"] if "nginx_p50_ms" in r else []
    print(f"model {r['model']} v{r['version']}, max_new_tokens={r['max_new_tokens']}")
    print(f"CPU isolation: {r['cpu_isolation']}")
    if r["gateway_settings"]:
        print(f"gateway settings: {', '.join(r['gateway_settings'])}")
    if r["profiled"]:
        print("PROFILED RUN: the gateway ran under py-spy; its figures carry the sampler's cost")
    print(f"nginx anchor: {r['nginx']}")
    head = ("p50 ms", "added", "p99 ms", "added")
    print(
        f"{'':28}" + "".join(f"{h:>9}" for h in head) + f"{f'req/s c={c}':>13}{'ratio':>8}"
        + f"{'CPU us/req':>12}"
    )  # fmt: skip
    for n in names:
        p50, p99, rps = r[f"{n}_p50_ms"], r[f"{n}_p99_ms"], r[f"{n}_rps_c{c}"]
        d50, d99, drps = r["direct_p50_ms"], r["direct_p99_ms"], r[f"direct_rps_c{c}"]
        cpu = r[f"{n}_cpu_us_per_request"]
        print(
            f"{n:28}{p50:9.2f}{p50 - d50:+9.2f}{p99:9.2f}{p99 - d99:+9.2f}{rps:13.1f}"
            f"{rps / drps:8.3f}" + (f"{cpu:12.0f}" if n != "direct" else f"{'-':>12}")
        )
    print(f"(CPU us/req: the proxy process's own CPU time per request in the c={c} phases)")
    print(
        f"time inside the gateway (mean, from its metrics) {r['gateway_internal_ms_mean']:.3f} ms"
    )
    print(f"gateway start-up {r['gateway_startup_s']:.2f} s, RSS {r['gateway_rss_mb']:.0f} MB")
    for name, passed in ok.items():
        print(f"  {'PASS' if passed else 'MISS'}  {name}")
    print(generator_line(r["generator"]))
    if "profile" in r:
        prof = profiling.Profile()
        prof.samples = r["profile"]["samples"]
        prof.importing = r["profile"]["importing_samples"]
        for which in ("self", "inclusive", "areas"):
            for share, name in r["profile"][which]:
                getattr(prof, which)[name] = round(share * prof.samples)
        for line in profiling.report(prof, len(r["profile"]["self"])):
            print(line)


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
