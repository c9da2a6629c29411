"""Server-side figures for the run's window: from Prometheus, or by scraping /metrics directly.

The series are those the mixin's rules read (monitoring/mixin: TF Serving's batching and latency
histograms, the gateway's request histograms, the exporter's GPU gauges, process CPU), with the
mixin's job selectors. With `--prometheus-url` they are queried over the run's window; with
`--metrics-url` (each component's /metrics page, no Prometheus needed) the load test samples them
itself every second and computes the same figures from the counter deltas; with `--server-pid`
it also reads the CPU time of local server processes from /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from monitoring.mixin.config import DEFAULT
from monitoring.mixin.model import GATEWAY_PREFIX, TFSERVING_PREFIX
from monitoring.mixin.slis import ANSWERED, DURATION
from stack.loadtest.procstat import cpu_seconds

BATCH = f"{TFSERVING_PREFIX}batching_session:"
TFS_LATENCY = f"{TFSERVING_PREFIX}request_latency"
TFS_RUNTIME = f"{TFSERVING_PREFIX}runtime_latency"
GW_QUEUE = f"{GATEWAY_PREFIX}queue_wait_seconds"
GW_REQUESTS = f"{GATEWAY_PREFIX}requests_total"
GPU_UTIL = "tokenpulse_gpu_utilization_ratio"
GPU_MEM = "tokenpulse_gpu_memory_used_bytes"
PROCESS_CPU = "process_cpu_seconds_total"
PREDICT = {"API": "predict"}
RUNTIME_PREDICT = {"API": "[Pp]redict"}  # runtime_latency says "Predict"

# what each figure means, for the report
FIGURES = {
    "batch_size_mean": "mean processed batch size (TF Serving batching)",
    "batch_queue_mean_s": "mean wait in TF Serving's batch queue",
    "batch_queue_p99_s": "p99 wait in TF Serving's batch queue",
    "model_time_mean_s": "mean model run time per predict (TF Serving runtime_latency)",
    "modelserver_latency_mean_s": "mean predict latency inside the model server",
    "modelserver_latency_p99_s": "p99 predict latency inside the model server",
    "gateway_latency_mean_s": "mean gateway request duration (2xx)",
    "gateway_latency_p99_s": "p99 gateway request duration (2xx)",
    "gateway_queue_wait_p99_s": "p99 wait for a gateway concurrency slot",
    "gateway_rps": "requests per second the gateway answered",
    "gpu_utilization": "GPU utilisation (exporter, mean over GPUs)",
    "gpu_memory_used_bytes": "GPU memory used (exporter, sum over GPUs)",
    "process_cpu_cores": "server process CPU, cores",
}

Labels = frozenset[tuple[str, str]]
Snapshot = dict[tuple[str, Labels], float]
_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass
class ServerView:
    """Server-side figures: `summary` over the whole window, `series` [(t, value)] over time."""

    source: str  # "prometheus", "scrape" or "none"
    summary: dict[str, float | None] = field(default_factory=dict)
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """For summary.json."""
        return {
            "source": self.source,
            "summary": self.summary,
            "series": {k: [[round(t, 3), v] for t, v in pts] for k, pts in self.series.items()},
            "notes": self.notes,
        }


def parse_metrics(text: str) -> Snapshot:
    """The samples of a Prometheus text exposition page."""
    out: Snapshot = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            continue
        try:
            value = float(m.group(4))
        except ValueError:
            continue
        labels = frozenset(_LABEL.findall(m.group(3) or ""))
        out[(m.group(1), labels)] = value
    return out


def scrape(url: str, timeout_s: float = 5.0) -> Snapshot:
    """One /metrics page, now (OSError when it cannot be read)."""
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return parse_metrics(resp.read().decode())


def batch_totals(url: str) -> tuple[float, float]:
    """(sum, count) of TF Serving's processed batch sizes so far, from its /metrics page at
    `url`; (0, 0) where it has none or cannot be read."""
    try:
        snap = scrape(url, timeout_s=10)
    except OSError:
        return 0.0, 0.0
    sizes = f"{BATCH}processed_batch_size"
    return total(snap, f"{sizes}_sum") or 0.0, total(snap, f"{sizes}_count") or 0.0


def _match(labels: Labels, want: dict[str, str]) -> bool:
    got = dict(labels)
    return all(re.fullmatch(v, got.get(k, "")) for k, v in want.items())


def total(snap: Snapshot, name: str, want: dict[str, str] | None = None) -> float | None:
    """The sum of `name`'s samples whose labels fully match the regexes of `want` (None: none)."""
    values = [v for (n, lab), v in snap.items() if n == name and _match(lab, want or {})]
    return sum(values) if values else None


def _delta(a: Snapshot, b: Snapshot, name: str, want: dict[str, str] | None = None) -> float | None:
    x, y = total(a, name, want), total(b, name, want)
    return None if x is None or y is None else max(0.0, y - x)


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile over cumulative (le, count) pairs."""
    buckets = sorted(buckets)
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    prev_le, prev_count = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):
                return prev_le
            if count == prev_count:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count)
        prev_le, prev_count = le, count
    return prev_le


def quantile_delta(
    a: Snapshot, b: Snapshot, name: str, q: float, want: dict[str, str] | None = None
) -> float | None:
    """The `q` quantile of histogram `name` over what it observed between snapshots `a` and `b`
    (`a` empty: over everything it observed)."""
    per_le: dict[float, float] = {}
    for (n, lab), v in b.items():
        if n != f"{name}_bucket" or not _match(lab, want or {}):
            continue
        le = float(dict(lab)["le"])
        base = a.get((n, lab), 0.0)
        per_le[le] = per_le.get(le, 0.0) + max(0.0, v - base)
    return histogram_quantile(q, list(per_le.items()))


def _ratio(x: float | None, y: float | None, scale: float = 1.0) -> float | None:
    return None if x is None or not y else x / y / scale


def figures(a: Snapshot, b: Snapshot, seconds: float) -> dict[str, float | None]:
    """Every figure between two snapshots `seconds` apart (TF Serving's microseconds → s)."""
    ok = {"code": "2.."}
    return {
        "batch_size_mean": _ratio(
            _delta(a, b, f"{BATCH}processed_batch_size_sum"),
            _delta(a, b, f"{BATCH}processed_batch_size_count"),
        ),
        "batch_queue_mean_s": _ratio(
            _delta(a, b, f"{BATCH}queuing_latency_sum"),
            _delta(a, b, f"{BATCH}queuing_latency_count"),
            1e6,
        ),
        "batch_queue_p99_s": _ratio(quantile_delta(a, b, f"{BATCH}queuing_latency", 0.99), 1e6),
        "model_time_mean_s": _ratio(
            _delta(a, b, f"{TFS_RUNTIME}_sum", RUNTIME_PREDICT),
            _delta(a, b, f"{TFS_RUNTIME}_count", RUNTIME_PREDICT),
            1e6,
        ),
        "modelserver_latency_mean_s": _ratio(
            _delta(a, b, f"{TFS_LATENCY}_sum", PREDICT),
            _delta(a, b, f"{TFS_LATENCY}_count", PREDICT),
            1e6,
        ),
        "modelserver_latency_p99_s": _ratio(quantile_delta(a, b, TFS_LATENCY, 0.99, PREDICT), 1e6),
        "gateway_latency_mean_s": _ratio(
            _delta(a, b, f"{DURATION}_sum", ok), _delta(a, b, f"{DURATION}_count", ok)
        ),
        "gateway_latency_p99_s": quantile_delta(a, b, DURATION, 0.99, ok),
        "gateway_queue_wait_p99_s": quantile_delta(a, b, GW_QUEUE, 0.99),
        "gateway_rps": _ratio(_delta(a, b, GW_REQUESTS), seconds),
        "gpu_utilization": _mean_gauge(b, GPU_UTIL),
        "gpu_memory_used_bytes": total(b, GPU_MEM),
        "process_cpu_cores": _ratio(_delta(a, b, PROCESS_CPU), seconds),
    }


def _mean_gauge(snap: Snapshot, name: str) -> float | None:
    values = [v for (n, _), v in snap.items() if n == name]
    return sum(values) / len(values) if values else None


class Scraper:
    """Samples /metrics pages (and local processes' CPU) every `interval_s` during a run."""

    def __init__(
        self, urls: Sequence[str], pids: Sequence[int] = (), interval_s: float = 1.0
    ) -> None:
        self.urls, self.pids, self.interval_s = list(urls), list(pids), interval_s
        self.samples: list[tuple[float, Snapshot]] = []
        self.failures: dict[str, str] = {}

    async def snapshot(self, session: aiohttp.ClientSession) -> Snapshot:
        """One sample of every page, merged (pages are of different components)."""
        snap: Snapshot = {}
        for url in self.urls:
            try:
                async with session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as resp:
                    snap.update(parse_metrics(await resp.text()))
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                self.failures[url] = type(exc).__name__
        cpu = []
        for pid in self.pids:
            with contextlib.suppress(OSError):  # a process that has gone counts no more
                cpu.append(cpu_seconds(pid))
        if cpu:
            snap[(PROCESS_CPU, frozenset({("job", "local")}))] = sum(cpu)
        return snap

    async def run(self, stop: asyncio.Event) -> None:
        """Sample until `stop` is set, then once more."""
        async with aiohttp.ClientSession() as session:
            while True:
                self.samples.append((time.monotonic(), await self.snapshot(session)))
                if stop.is_set():
                    return
                try:
                    await asyncio.wait_for(stop.wait(), self.interval_s)
                except TimeoutError:
                    pass

    def view(self, start: float) -> ServerView:
        """Figures over the whole run and per interval (t: seconds from `start`)."""
        view = ServerView("scrape")
        view.notes += [f"could not scrape {u}: {why}" for u, why in sorted(self.failures.items())]
        if len(self.samples) < 2:
            view.notes.append("fewer than two scrapes: no server-side figures")
            return view
        (t0, first), (t1, last) = self.samples[0], self.samples[-1]
        view.summary = _rounded(figures(first, last, t1 - t0))
        for (ta, a), (tb, b) in zip(self.samples, self.samples[1:], strict=False):
            for name, value in figures(a, b, tb - ta).items():
                if value is not None:
                    view.series.setdefault(name, []).append((tb - start, round(value, 6)))
        return view


def _rounded(values: dict[str, float | None]) -> dict[str, float | None]:
    return {k: None if v is None else round(v, 6) for k, v in values.items()}


class PrometheusError(Exception):
    """Prometheus could not be queried (one line)."""


def prometheus_exprs(window: str) -> dict[str, str]:
    """The figures as PromQL over `window` (a duration such as "30s"), with the mixin's jobs."""
    sel = DEFAULT.sel
    ms, gw, ex = sel("modelserver"), sel("gateway"), sel("exporter")
    predict = sel("modelserver", 'API="predict"')
    runtime = sel("modelserver", 'API=~"[Pp]redict"')
    answered = sel("gateway", ANSWERED)

    def r(metric: str, s: str) -> str:
        return f"sum(rate({metric}{s}[{window}]))"

    def q(metric: str, s: str) -> str:
        return f"histogram_quantile(0.99, sum by (le) (rate({metric}_bucket{s}[{window}])))"

    return {
        "batch_size_mean": f"{r(BATCH + 'processed_batch_size_sum', ms)}"
        f" / {r(BATCH + 'processed_batch_size_count', ms)}",
        "batch_queue_mean_s": f"{r(BATCH + 'queuing_latency_sum', ms)}"
        f" / {r(BATCH + 'queuing_latency_count', ms)} / 1e6",
        "batch_queue_p99_s": f"{q(BATCH + 'queuing_latency', ms)} / 1e6",
        "model_time_mean_s": f"{r(TFS_RUNTIME + '_sum', runtime)}"
        f" / {r(TFS_RUNTIME + '_count', runtime)} / 1e6",
        "modelserver_latency_mean_s": f"{r(TFS_LATENCY + '_sum', predict)}"
        f" / {r(TFS_LATENCY + '_count', predict)} / 1e6",
        "modelserver_latency_p99_s": f"{q(TFS_LATENCY, predict)} / 1e6",
        "gateway_latency_mean_s": f"{r(DURATION + '_sum', answered)}"
        f" / {r(DURATION + '_count', answered)}",
        "gateway_latency_p99_s": q(DURATION, answered),
        "gateway_queue_wait_p99_s": q(GW_QUEUE, gw),
        "gateway_rps": r(GW_REQUESTS, gw),
        "gpu_utilization": f"avg(avg_over_time({GPU_UTIL}{ex}[{window}]))",
        "gpu_memory_used_bytes": f"sum(max_over_time({GPU_MEM}{ex}[{window}]))",
        "process_cpu_cores": f'sum(rate({PROCESS_CPU}{{job=~"{_job_regex()}"}}[{window}]))',
    }


def _job_regex() -> str:
    # RE2 escapes, then doubled for the PromQL string literal ("\-" alone is a parse error)
    names = (DEFAULT.jobs.modelserver, DEFAULT.jobs.gateway)
    return "|".join(re.escape(j).replace("\\", "\\\\") for j in names)


class Prometheus:
    """Instant and range queries against a Prometheus HTTP API."""

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self.url, self.timeout_s = url.rstrip("/"), timeout_s

    def _get(self, path: str, params: dict[str, str]) -> Any:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as resp:
                doc = json.loads(resp.read())
        except urllib.error.HTTPError as exc:  # Prometheus says why in the body (e.g. a 400)
            try:
                why = json.loads(exc.read()).get("error", exc.reason)
            except ValueError:
                why = exc.reason
            raise PrometheusError(f"Prometheus refused a query ({exc.code}): {why}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise PrometheusError(f"cannot query Prometheus at {self.url}: {exc}") from None
        if doc.get("status") != "success":
            raise PrometheusError(f"Prometheus refused a query: {doc.get('error')}")
        return doc["data"]["result"]

    def instant(self, expr: str, at: float) -> float | None:
        """The single value of `expr` at unix time `at` (None: no data)."""
        result = self._get("/api/v1/query", {"query": expr, "time": f"{at:.3f}"})
        values = [float(r["value"][1]) for r in result]
        finite = [v for v in values if math.isfinite(v)]
        return finite[0] if finite else None

    def range(
        self, expr: str, start: float, end: float, step_s: float
    ) -> list[tuple[float, float]]:
        """[(unix time, value)] of the first series of `expr`."""
        result = self._get(
            "/api/v1/query_range",
            {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"},
        )
        if not result:
            return []
        return [(float(t), float(v)) for t, v in result[0]["values"] if math.isfinite(float(v))]

    def view(
        self, start_unix: float, end_unix: float, step_s: float = 5.0, window_s: float = 30.0
    ) -> ServerView:
        """Figures over [start, end]: summary over the whole window, series every `step_s`."""
        view = ServerView("prometheus")
        whole = f"{max(int(math.ceil(end_unix - start_unix)), int(window_s))}s"
        for name, expr in prometheus_exprs(whole).items():
            view.summary[name] = _round_opt(self.instant(expr, end_unix))
        for name, expr in prometheus_exprs(f"{int(window_s)}s").items():
            pts = self.range(expr, start_unix, end_unix, step_s)
            if pts:
                view.series[name] = [(t - start_unix, round(v, 6)) for t, v in pts]
        return view


def _round_opt(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


def disagreement(client: dict[str, Any], server: ServerView, route: str) -> str | None:
    """A line when the client's and the server's mean latency disagree, else None.

    Means, not quantiles: a histogram's mean is exact, its quantiles only as fine as its buckets.
    The client's mean is from the intended send time, so it includes any time outside the server.
    """
    name = "modelserver_latency_mean_s" if route == "tfserving" else "gateway_latency_mean_s"
    theirs, ours = server.summary.get(name), client["latency_s"].get("mean")
    if theirs is None:
        theirs = client["server_latency_s"].get("mean")  # the responses' own timings
        name = "the responses' own timings"
    if theirs is None or ours is None:
        return None
    gap = ours - theirs
    if abs(gap) <= max(0.25 * ours, 0.02):
        return None
    if gap > 0:
        return (
            f"client and server disagree: the client's mean latency is {ours * 1000:.1f} ms, the "
            f"server's ({name}) {theirs * 1000:.1f} ms; {gap * 1000:.1f} ms per request is spent "
            "outside the server's clock (network, proxies, connection set-up, or a late "
            "generator: see send lag)"
        )
    return (
        f"client and server disagree: the server's mean latency ({name}) "
        f"{theirs * 1000:.1f} ms is above the client's {ours * 1000:.1f} ms; the server saw "
        "other traffic in the window, or its figures are not this run's"
    )
