"""`run(settings)`: one run, a sweep, `--find-max` or a scenario; then the report (and the
comparison). Each run is `measure.one_run`."""

from __future__ import annotations

import asyncio
import shlex
import sys
from typing import Any, TextIO

from stack.loadtest import compare, report
from stack.loadtest.engine import LoadtestError
from stack.loadtest.findmax import FindMax, Probe, SearchStopped, find_max
from stack.loadtest.measure import one_run, preflight, workload_of
from stack.loadtest.scenario import run_seed
from stack.loadtest.settings import SECRET_FLAGS, LoadtestSettings
from stack.loadtest.stats import Slo
from stack.loadtest.workload import WorkloadError
from tokenpulse.logging import configure_logging, get_logger

log = get_logger(__name__)
EXIT_SATURATED = 3


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
        workload_of(s, len(keys))
    except (WorkloadError, ValueError) as exc:
        raise LoadtestError(str(exc)) from None
    slo = Slo.from_mixin(s.slo_latency_s, s.slo_error_ratio)
    progress = sys.stderr if s.progress else None
    if s.scenario == "seed":
        doc = run_seed(s, slo, progress=progress)
    else:
        asyncio.run(preflight(s, keys))
        doc = _measure(s, keys, slo, progress)
    doc["command"] = command_line(s, argv)
    doc["slo"] = vars(slo) | {"quantile": slo.quantile_name}
    path = report.write(s.report_dir, doc)
    print(f"report: {path}", file=out)
    for line in report.headline(doc):
        print(line, file=out)
    if s.against is not None:
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
