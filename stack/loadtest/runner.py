"""`run(settings)`: one run, a sweep, or `--find-max`; then the report (and the comparison)."""

from __future__ import annotations

import asyncio
import shlex
import sys
import time
from typing import Any, TextIO

from stack.loadtest import report
from stack.loadtest.arrivals import RateProfile, schedule
from stack.loadtest.client import Client, Outcome, make_route
from stack.loadtest.engine import Limits, LoadtestError, closed_loop, open_loop
from stack.loadtest.findmax import FindMax, Probe, SearchStopped, find_max
from stack.loadtest.prom import Prometheus, PrometheusError, Scraper, ServerView, disagreement
from stack.loadtest.settings import SECRET_FLAGS, LoadtestSettings
from stack.loadtest.stats import Slo, summarize, timeseries
from stack.loadtest.workload import Workload, WorkloadError
from tokenpulse.logging import configure_logging, get_logger

log = get_logger(__name__)
EXIT_SATURATED = 3


def _workload(s: LoadtestSettings, keys: int) -> Workload:
    return Workload(s.prompt_chars, s.max_new_tokens, s.prompts_file, keys=keys, seed=s.seed)


def _client(s: LoadtestSettings, keys: list[str]) -> Client:
    route = make_route(s.route, s.interaction, s.model, s.truncate_prompt_tokens)
    return Client(s.url, route, keys, s.timeout_s)


async def _preflight(s: LoadtestSettings, keys: list[str]) -> None:
    """One request before the load: a target that cannot answer is a one-line error."""
    async with _client(s, keys) as client:
        out = await client.send(_workload(s, len(keys)).next(), time.monotonic())
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
    workload = _workload(s, len(keys))
    scraper = Scraper(s.metrics_url, s.server_pid) if s.metrics_url or s.server_pid else None
    stop = asyncio.Event()
    scraping = asyncio.create_task(scraper.run(stop)) if scraper else None
    async with _client(s, keys) as client:
        if concurrency is not None:
            rec = await closed_loop(
                client,
                workload,
                concurrency,
                s.duration_s,
                limits=limits,
                drain_s=s.timeout_s + 1,
                label=label,
                progress=progress,
            )
            offered = None
        else:
            assert rate is not None
            profile = RateProfile(rate, s.duration_s, s.ramp_from, s.ramp_s)
            offsets = schedule(profile, s.arrival, s.seed)
            rec = await open_loop(
                client,
                workload,
                offsets,
                s.duration_s,
                limits=limits,
                drain_s=s.timeout_s + 1,
                label=label,
                progress=progress,
            )
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
        "generator": {
            "max_cpu": max((x.cpu for x in rec.self_samples), default=None),
            "max_loop_lag_s": max((x.lag_s for x in rec.self_samples), default=None),
            "saturated": rec.saturated,
        },
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


def _label(s: LoadtestSettings, value: float) -> str:
    return f"c={int(value)}" if s.mode == "closed" else f"{value:g}/s"


def command_line(s: LoadtestSettings, argv: list[str] | None) -> dict[str, Any]:
    """The command as invoked (secrets redacted) and the settings as an equivalent command."""
    invoked = []
    hide = False
    for word in argv or []:
        if hide and not word.startswith("-"):
            invoked.append("REDACTED")
            continue
        hide = word in SECRET_FLAGS
        flag, eq, _ = word.partition("=")
        invoked.append(f"{flag}=REDACTED" if eq and flag in SECRET_FLAGS else word)
    equivalent = ["tokenpulse", "loadtest"]
    for name in sorted(s.model_fields_set):
        if name == "key":
            continue
        value = getattr(s, name)
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            equivalent.append(flag if value else f"--no-{flag[2:]}")
        elif isinstance(value, list):
            equivalent += [flag, *(str(v) for v in value)]
        else:
            equivalent += [flag, str(value)]
    return {
        "invoked": shlex.join(invoked) if invoked else None,
        "equivalent": shlex.join(equivalent),
        "keys": "given, not recorded" if s.key or s.key_file else "none",
    }


def run(
    settings: LoadtestSettings, argv: list[str] | None = None, out: TextIO | None = None
) -> int:
    """Run what the settings ask, write the report; 0, or EXIT_SATURATED when the generator
    stopped itself. LoadtestError (one line) for a target or workload that cannot be used."""
    configure_logging("loadtest", settings.log_level)
    out = out or sys.stdout
    s = settings
    try:
        keys = s.api_keys()
        _workload(s, len(keys))
    except (WorkloadError, ValueError) as exc:
        raise LoadtestError(str(exc)) from None
    slo = Slo.from_mixin(s.slo_latency_s, s.slo_error_ratio)
    progress = sys.stderr if s.progress else None
    if s.scenario == "seed":
        from stack.loadtest.scenario import run_seed

        doc = run_seed(s, slo, progress=progress)
    else:
        asyncio.run(_preflight(s, keys))
        doc = _measure(s, keys, slo, progress)
    doc["command"] = command_line(s, argv)
    doc["slo"] = vars(slo) | {"quantile": slo.quantile_name}
    path = report.write(s.report_dir, doc)
    print(f"report: {path}", file=out)
    for line in report.headline(doc):
        print(line, file=out)
    if s.against is not None:
        from stack.loadtest import compare

        result = compare.write(s.report_dir, s.against)
        print(f"comparison: {s.report_dir / 'compare.html'}", file=out)
        for line in compare.lines(result):
            print(line, file=out)
    saturated = [r["generator"]["saturated"] for r in doc["runs"] if r["generator"]["saturated"]]
    if saturated or (doc.get("find_max") or {}).get("stopped"):
        print(f"STOPPED: {saturated[0] if saturated else doc['find_max']['stopped']}", file=out)
        return EXIT_SATURATED
    return 0


def _measure(
    s: LoadtestSettings, keys: list[str], slo: Slo, progress: TextIO | None
) -> dict[str, Any]:
    doc: dict[str, Any] = {"kind": "run", "runs": [], "target": {"url": s.url, "route": s.route}}
    if s.find_max:
        doc["kind"] = "find_max"

        def probe(rate: float, repeat: int) -> Probe:
            label = f"{rate:g}/s #{repeat + 1}"
            run = one_run(s, keys, slo, rate=rate, label=label, progress=progress)
            doc["runs"].append(run)
            if run["generator"]["saturated"]:
                raise SearchStopped(run["generator"]["saturated"])
            verdict = run["client"]["slo"]
            log.info("probe", rate=rate, repeat=repeat, held=verdict["held"])
            return Probe(rate, repeat, verdict["held"], verdict["reasons"], run["client"])

        result: FindMax = find_max(
            probe,
            start=s.find_max_start,
            factor=s.find_max_factor,
            repeats=s.find_max_repeats,
            tolerance=s.find_max_tolerance,
            limit=s.find_max_limit,
        )
        doc["find_max"] = result.as_dict()
        return doc
    values = s.sweep or [float(s.concurrency if s.mode == "closed" else s.rate)]
    if s.sweep:
        doc["kind"] = "sweep"
    for value in values:
        kwargs: dict[str, Any] = (
            {"concurrency": int(value)} if s.mode == "closed" else {"rate": value}
        )
        run = one_run(s, keys, slo, label=_label(s, value), progress=progress, **kwargs)
        doc["runs"].append(run)
        if run["generator"]["saturated"]:
            raise_stop = run["generator"]["saturated"]
            log.warning("generator saturated", reason=raise_stop)
            break
    return doc
