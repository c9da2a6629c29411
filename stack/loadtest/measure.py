"""`one_run`: one open- or closed-loop run, measured on both sides (the client's figures, the
server's from a scrape or Prometheus) with the generator's verdict: what `tokenpulse loadtest`
repeats for a sweep or a capacity search, and `--scenario seed` for each of its servers."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any, TextIO

from stack.loadtest.arrivals import RateProfile, schedule
from stack.loadtest.client import Client, Outcome, make_route
from stack.loadtest.engine import Limits, LoadtestError, closed_loop, health, open_loop
from stack.loadtest.prom import Prometheus, PrometheusError, Scraper, ServerView, disagreement
from stack.loadtest.settings import LoadtestSettings
from stack.loadtest.stats import Slo, summarize, timeseries
from stack.loadtest.workload import Workload


def workload_of(s: LoadtestSettings, keys: int) -> Workload:
    """The settings' workload, its keys taken in turn."""
    return Workload(s.prompt_chars, s.max_new_tokens, s.prompts_file, keys=keys, seed=s.seed)


def client_of(s: LoadtestSettings, keys: list[str]) -> Client:
    """A client of the settings' target and route."""
    route = make_route(s.route, s.interaction, s.model, s.truncate_prompt_tokens)
    return Client(s.url, route, keys, s.timeout_s)


async def preflight(s: LoadtestSettings, keys: list[str]) -> None:
    """One request before the load: a target that cannot answer is a one-line error."""
    async with client_of(s, keys) as client:
        out = await client.send(workload_of(s, len(keys)).next(), time.monotonic())
    if out.ok:
        return
    where = f"{s.url} ({s.route} route)"
    if out.status == 0:
        raise LoadtestError(f"cannot reach {where}: {out.label}")
    if out.status in (401, 403):
        raise LoadtestError(f"{where} refused the API key ({out.label}): give --key or --key-file")
    if out.status == 404:
        raise LoadtestError(f"{where} answered 404: wrong --route, --url or --model?")
    if 400 <= out.status < 500 and out.status != 429:
        raise LoadtestError(
            f"{where} rejected the first request ({out.label}): check the workload (a prompt "
            "longer than the model's window needs --truncate-prompt-tokens)"
        )


def one_run(
    s: LoadtestSettings,
    keys: list[str],
    slo: Slo,
    *,
    rate: float | None = None,
    concurrency: int | None = None,
    label: str = "",
    progress: TextIO | None = sys.stderr,
) -> dict[str, Any]:
    """One open-loop run at `rate` or closed-loop run at `concurrency`, measured both sides."""
    return asyncio.run(_one_run(s, keys, slo, rate, concurrency, label, progress))


async def _one_run(
    s: LoadtestSettings,
    keys: list[str],
    slo: Slo,
    rate: float | None,
    concurrency: int | None,
    label: str,
    progress: TextIO | None,
) -> dict[str, Any]:
    limits = Limits(s.max_generator_cpu, s.max_loop_lag_s, s.saturation_grace_s, s.max_in_flight)
    workload = workload_of(s, len(keys))
    scraper = Scraper(s.metrics_url, s.server_pid) if s.metrics_url or s.server_pid else None
    stop = asyncio.Event()
    scraping = asyncio.create_task(scraper.run(stop)) if scraper else None
    loop: dict[str, Any] = {
        "limits": limits, "drain_s": s.timeout_s + 1, "label": label, "progress": progress
    }  # fmt: skip
    async with client_of(s, keys) as client:
        if concurrency is not None:
            rec = await closed_loop(client, workload, concurrency, s.duration_s, **loop)
            offered = None
        else:
            assert rate is not None
            profile = RateProfile(rate, s.duration_s, s.ramp_from, s.ramp_s)
            offsets = schedule(profile, s.arrival, s.seed)
            rec = await open_loop(client, workload, offsets, s.duration_s, **loop)
            offered = len(offsets) / s.duration_s
    stop.set()
    if scraping is not None:
        await scraping
    client_figures = summarize(rec.outcomes, rec.window_s, slo, offered)
    if scraper is not None:
        server = scraper.view(rec.start)
    elif s.prometheus_url:
        end_unix = rec.start_unix + (rec.end - rec.start)
        try:
            server = Prometheus(s.prometheus_url).view(
                rec.start_unix, end_unix, s.prometheus_step_s, s.prometheus_window_s
            )
        except PrometheusError as exc:
            server = ServerView("none", notes=[str(exc)])
    else:
        server = ServerView("none", notes=["no --prometheus-url or --metrics-url given"])
    flags = [f for f in (disagreement(client_figures, server, s.route), rec.saturated) if f]
    lag = client_figures["send_lag_s"]["p99"]
    if lag is not None and lag > 0.05:
        flags.append(
            f"sends ran late (p99 {lag * 1000:.0f} ms behind schedule): latencies count it, but "
            "the generator is near its limit"
        )
    return {
        "label": label,
        "mode": "closed" if concurrency is not None else "open",
        "rate": rate,
        "concurrency": concurrency,
        "started_unix": rec.start_unix,
        "window_s": rec.window_s,
        "client": client_figures,
        "series": timeseries(rec.outcomes, rec.start),
        "server": server.as_dict(),
        "generator": health([rec]),
        "flags": flags,
        "outcomes": _outcome_table(rec.outcomes, rec.start),
    }


def _outcome_table(outcomes: list[Outcome], start: float) -> dict[str, list[Any]]:
    """Per-request columns (intended offset, latency, status label) for the JSON's readers."""
    ordered = sorted(outcomes, key=lambda o: o.intended)
    return {
        "intended_s": [round(o.intended - start, 4) for o in ordered],
        "sent_s": [round(o.sent - start, 4) for o in ordered],
        "latency_s": [round(o.latency_s, 5) for o in ordered],
        "label": [o.label for o in ordered],
    }
