"""`--scenario seed`: the seed's story under one load, on three servers in turn.

1. the naive server (stack.loadtest.naive_server): model in-process, one request at a time;
2. the model server with batching off;
3. the model server with batching on (the shipped serving/config batching_parameters.txt).

Each gets the same open-loop schedule and the same requests (same seed) on TF Serving's REST
predict route, with its /metrics (batch size, queueing) and process CPU sampled. Without --rate
the rate is 70 % of what the naive server can do one at a time (measured in its warm-up), so
the naive server is busy but not overrun.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from stack.launch import http_ok, running_modelserver, running_process
from stack.loadtest.client import TfServingRoute
from stack.loadtest.engine import LoadtestError
from stack.loadtest.measure import one_run
from stack.loadtest.report import gpus
from stack.loadtest.settings import LoadtestSettings
from stack.loadtest.stats import Slo
from stack.loadtest.workload import Workload
from tokenpulse import paths
from tokenpulse.procs import free_port

NAIVE_UTILISATION = 0.7
WARMUP_REQUESTS = 5
SERVERS = ("naive Python server", "model server, batching off", "model server, batching on")


@contextlib.contextmanager
def _naive(version_dir: Path) -> Iterator[tuple[str, list[str], int]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        sys.executable,
        "-m",
        "stack.loadtest.naive_server",
        "--model-dir",
        str(version_dir),
        f"--port={port}",
    ]
    with running_process(
        argv, lambda: http_ok(f"{url}/healthz", 0.5), what="naive server", start_timeout_s=120
    ) as child:
        yield url, [], child.pid


@contextlib.contextmanager
def _modelserver(base: Path, batching: bool) -> Iterator[tuple[str, list[str], int]]:
    params = paths.BATCHING_PARAMETERS if batching else None
    with running_modelserver(base, enable_batching=batching, batching_parameters_file=params) as ms:
        yield ms.rest_url, [ms.metrics_url], ms.pid


def _warm_up(url: str, s: LoadtestSettings) -> float:
    """A few sequential requests (first-call costs out of the way); their median seconds."""
    route = TfServingRoute(s.model)
    workload = Workload(s.prompt_chars, s.max_new_tokens, s.prompts_file, seed=s.seed + 1)
    times = []
    for _ in range(WARMUP_REQUESTS):
        body = json.dumps(route.body(workload.next())).encode()
        req = urllib.request.Request(
            url + route.path(), data=body, headers={"Content-Type": "application/json"}
        )
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(req, timeout=s.timeout_s) as resp:
                resp.read()
        except OSError as exc:
            raise LoadtestError(f"seed scenario: {url} failed its warm-up request: {exc}") from None
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def _version_dir(path: Path) -> Path:
    if (path / "saved_model.pb").is_file():
        return path.resolve()
    versions = sorted((p for p in path.glob("*") if p.name.isdigit()), key=lambda p: int(p.name))
    if versions and (versions[-1] / "saved_model.pb").is_file():
        return versions[-1].resolve()
    raise LoadtestError(f"--scenario-model {path}: no saved_model.pb there or in a version dir")


def hardware_note() -> str:
    """What the figures ran on."""
    found = gpus()
    if found:
        return f"GPU: {found[0]}"
    import os

    return (
        f"CPU-only: no GPU on this machine ({os.cpu_count()} CPU cores shared by the load "
        "generator and the server; GPU utilisation n/a). The seed's figures were on a GPU."
    )


def run_seed(s: LoadtestSettings, slo: Slo, progress: TextIO | None = sys.stderr) -> dict[str, Any]:
    """Run the three servers under the same load; the report document."""
    version_dir = _version_dir(s.scenario_model or Path())
    rate = s.rate if "rate" in s.model_fields_set else None
    runs: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tp-seed-") as tmp:
        base = Path(tmp) / "models"
        base.mkdir()
        (base / "1").symlink_to(version_dir, target_is_directory=True)
        starters: list[Callable[[], contextlib.AbstractContextManager[Any]]] = [
            lambda: _naive(version_dir),
            lambda: _modelserver(base, batching=False),
            lambda: _modelserver(base, batching=True),
        ]
        for name, start in zip(SERVERS, starters, strict=True):
            with start() as (url, metrics, pid):
                service_s = _warm_up(url, s)
                if rate is None:
                    rate = round(NAIVE_UTILISATION / service_s, 2)
                sub = s.model_copy(
                    update={
                        "url": url,
                        "route": "tfserving",
                        "metrics_url": metrics,
                        "server_pid": [pid],
                        "prometheus_url": None,
                    }
                )
                run = one_run(sub, [], slo, rate=rate, label=name, progress=progress)
            runs.append(run)
            c = run["client"]
            rows.append(
                {
                    "server": name,
                    "rate": rate,
                    "warmup_service_s": round(service_s, 5),
                    "mean_s": c["latency_s"]["mean"],
                    "p50_s": c["latency_s"]["p50"],
                    "p99_s": c["latency_s"]["p99"],
                    "throughput_rps": c["throughput_rps"],
                    "errors": c["errors"] + c["sheds"],
                    "batch_size": run["server"]["summary"].get("batch_size_mean"),
                }
            )
    note = (
        f"The same open-loop {s.arrival} load at {rate:g} requests/s for {s.duration_s:g} s "
        f"on each server (TF Serving REST predict, no gateway). {hardware_note()}"
    )
    return {
        "kind": "scenario",
        "runs": runs,
        "target": {"url": "three local servers", "route": "tfserving"},
        "scenario": {
            "name": "seed",
            "rate": rate,
            "rows": rows,
            "note": note,
            "model": str(version_dir),
        },
    }
