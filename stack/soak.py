"""`tokenpulse soak --minutes N`: healthy traffic against the running stack for a while.

Steady requests at `--rps` through the gateway (the demo key) while every process of the stack
(each component and the processes it started, e.g. the gateway's spool writer) has its resident
memory sampled from /proc/<pid>/status. At the end: how many requests failed (anything but 200
and intended 429s), what reached the on-call receiver (nothing may page; the Watchdog aside), and
each process's RSS growth. Writes soak-report.json (and soak-rss.png when matplotlib is
installed). One of the project's processes whose RSS grew more than `--max-growth-pct` (5 %)
from the end of the warm-up (the first tenth: caches and the TensorFlow allocator fill first) to
the end fails the soak; Prometheus and Alertmanager are reported, not judged (NOT_JUDGED says
why), and soaks shorter than JUDGE_GROWTH_MIN_S report growth without judging it.
Exit status: 0 healthy, 1 a page, a failed request, a process that exited or grew, 2 no running
stack.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from stack.drill.runner import wait_quiet
from stack.drill.target import Target, is_watchdog
from stack.up.state import NoRunningStack
from tokenpulse.procs import child_pids
from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args

WARMUP_SHARE = 0.1  # growth is measured from the end of the first tenth (caches fill first)
JUDGE_GROWTH_MIN_S = 300.0  # over a shorter soak, start-up allocation swamps any trend
# Reported, not judged: their memory follows their own retention, not our code. Prometheus's head
# block holds every sample (and its series' postings) until the first compaction, ~3 h after
# start, so it grows through any soak shorter than that; Alertmanager keeps alerts and silences.
NOT_JUDGED = frozenset({"prometheus", "alertmanager"})


def judged(name: str) -> bool:
    """Whether a process's growth is ours to judge: not Prometheus or Alertmanager, nor their
    second instances under `up --ha` (prometheus-2, alertmanager-2)."""
    return name.split("-")[0] not in NOT_JUDGED


class SoakSettings(BaseSettings):
    """How long and how hard; each is also TOKENPULSE_SOAK_<NAME>."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_SOAK_", extra="ignore")

    minutes: float = Field(30.0, gt=0, description="how long to soak")
    rps: float = Field(2.0, gt=0, le=200, description="requests per second through the gateway")
    sample_every_s: float = Field(5.0, gt=0, description="seconds between RSS samples")
    max_growth_pct: float = Field(
        5.0, ge=0, description="most RSS growth after the warm-up a process may show (percent)"
    )
    run_dir: Path = Field(Path("run"), description="the run directory of the running `up`")
    report_dir: Path = Field(Path("."), description="where soak-report.json (and the plot) go")


def rss_bytes(pid: int) -> int | None:
    """Resident set size of one process (VmRSS), None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


def processes(pids: dict[str, int]) -> dict[str, int]:
    """Each component's process and its children (`gateway/1234`), by name."""
    out = dict(pids)
    for name, pid in pids.items():
        for child in child_pids(pid):
            out[f"{name}/{child}"] = child
    return out


@dataclass
class Series:
    """One process's RSS over time."""

    pid: int
    t_s: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """First, warmed-up, last and peak RSS; growth after the warm-up and overall."""
        if not self.rss:
            return {"pid": self.pid, "samples": 0}
        n = len(self.rss)
        # medians, so one allocation spike or a garbage-collected heap's sawtooth is not a
        # trend: the first and last twentieth, and the tenth right after the warm-up
        head = statistics.median(self.rss[: max(1, n // 20)])
        tail = statistics.median(self.rss[-max(1, n // 20) :])
        start = int(n * WARMUP_SHARE)
        warm = statistics.median(self.rss[start : max(start + 1, int(n * 2 * WARMUP_SHARE))])
        return {
            "pid": self.pid,
            "samples": len(self.rss),
            "span_s": round(self.t_s[-1] - self.t_s[0], 1) if self.t_s else 0.0,
            "first_mib": round(self.rss[0] / 2**20, 1),
            "warm_mib": round(warm / 2**20, 1),
            "last_mib": round(self.rss[-1] / 2**20, 1),
            "peak_mib": round(max(self.rss) / 2**20, 1),
            "growth_pct": round(100 * (tail - head) / head, 2),
            "growth_after_warmup_pct": round(100 * (tail - warm) / warm, 2),
        }


@dataclass
class SoakResult:
    """What the soak saw."""

    minutes: float
    rps: float
    requests: int = 0
    codes: dict[str, int] = field(default_factory=dict)
    failed_requests: int = 0
    pages: list[str] = field(default_factory=list)
    notifications: list[str] = field(default_factory=list)
    exited: list[str] = field(default_factory=list)
    rss: dict[str, dict[str, Any]] = field(default_factory=dict)
    grew: list[str] = field(default_factory=list)  # processes over the growth bound
    # critical alerts still firing or pending when the soak began (an earlier incident's, after
    # waiting QUIET_TIMEOUT_S for them to clear): their pages are not the soak's
    loud_before: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """No page, no failed request, no process gone or growing."""
        return not (self.pages or self.failed_requests or self.exited or self.grew)


def judge_growth(rss: dict[str, dict[str, Any]], max_growth_pct: float) -> list[str]:
    """The project's processes whose RSS grew more than `max_growth_pct` after the warm-up, over
    a soak long enough to judge (JUDGE_GROWTH_MIN_S of samples); NOT_JUDGED are reported only."""
    return sorted(
        f"{name} (+{r['growth_after_warmup_pct']:.1f}%)"
        for name, r in rss.items()
        if judged(name)
        and r.get("span_s", 0.0) >= JUDGE_GROWTH_MIN_S
        and r["growth_after_warmup_pct"] > max_growth_pct
    )


def soak(target: Target, settings: SoakSettings) -> tuple[SoakResult, dict[str, Series]]:
    """Traffic for `minutes`, RSS sampled every `sample_every_s`; the result and the series."""
    result = SoakResult(settings.minutes, settings.rps)
    result.loud_before = wait_quiet(target)  # from a quiet stack: an earlier page is not ours
    first = len(target.notes())
    series: dict[str, Series] = {}
    initial = dict(target.refresh().pids)
    started = time.monotonic()
    end = started + settings.minutes * 60
    with target.traffic(settings.rps) as traffic:
        while True:
            now = time.monotonic()
            for name, pid in processes(target.refresh().pids).items():
                rss = rss_bytes(pid)
                if rss is None:
                    continue
                s = series.setdefault(name, Series(pid))
                s.t_s.append(round(now - started, 1))
                s.rss.append(rss)
            if now >= end:
                break
            time.sleep(min(settings.sample_every_s, max(0.0, end - now)))
    pids = target.refresh().pids
    result.exited = sorted(
        f"{n} (pid {p})" for n, p in initial.items() if pids.get(n) != p or rss_bytes(p) is None
    )
    result.requests = len(traffic.codes)
    for code in traffic.codes:
        result.codes[str(code)] = result.codes.get(str(code), 0) + 1
    result.failed_requests = traffic.failures()
    notes = [n for n in target.notes()[first:] if n.status == "firing"]
    result.pages = sorted({f"{n.alertname} -> {n.receiver}" for n in notes if n.is_page})
    result.notifications = sorted(
        {f"{n.alertname} -> {n.receiver}" for n in notes if not is_watchdog(n.alertname)}
    )
    result.rss = {name: s.summary() for name, s in sorted(series.items())}
    result.grew = judge_growth(result.rss, settings.max_growth_pct)
    return result, series


def plot(series: dict[str, Series], path: Path) -> bool:
    """RSS over time, one line per process (False without matplotlib)."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=100)
    for name, s in sorted(series.items()):
        ax.plot([t / 60 for t in s.t_s], [r / 2**20 for r in s.rss], label=name)
    ax.set_xlabel("minutes")
    ax.set_ylabel("RSS (MiB)")
    ax.set_title("tokenpulse soak: resident memory per process")
    ax.legend(fontsize=7, loc="upper left", ncols=2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def summary(result: SoakResult) -> str:
    """The soak's findings as text: traffic, pages, and one RSS row per process."""
    lines = [
        f"soak: {result.minutes:g} min at {result.rps:g} req/s: {result.requests} requests "
        f"{result.codes}, {result.failed_requests} failed",
        f"pages: {', '.join(result.pages) or 'none'}; other notifications: "
        f"{', '.join(n for n in result.notifications if n not in result.pages) or 'none'}",
    ]
    if result.loud_before:
        lines.append(f"not quiet when it began: {', '.join(result.loud_before)} still critical")
    if result.exited:
        lines.append(f"exited or restarted: {', '.join(result.exited)}")
    if result.grew:
        lines.append(f"grew beyond the bound after the warm-up: {', '.join(result.grew)}")
    width = max((len(n) for n in result.rss), default=7)
    lines.append(f"{'process':<{width}}  first MiB  warm MiB  last MiB  peak MiB  growth  "
                 "after warm-up")  # fmt: skip
    for name, r in result.rss.items():
        if not r.get("samples"):
            continue
        lines.append(
            f"{name:<{width}}  {r['first_mib']:>9.1f}  {r['warm_mib']:>8.1f}  {r['last_mib']:>8.1f}"
            f"  {r['peak_mib']:>8.1f}  {r['growth_pct']:>5.1f}%"
            f"  {r['growth_after_warmup_pct']:>12.1f}%"
            + ("  (not judged)" if not judged(name) else "")
        )
    lines.append("PASS" if result.passed else "FAIL")
    return "\n".join(lines)


def write_report(result: SoakResult, series: dict[str, Series], report_dir: Path) -> Path:
    """soak-report.json (every sample too) and, with matplotlib, soak-rss.png."""
    report_dir.mkdir(parents=True, exist_ok=True)
    doc = {
        "finished_at": datetime.now(UTC).isoformat(),
        "passed": result.passed,
        **asdict(result),
        "samples": {n: {"t_s": s.t_s, "rss_bytes": s.rss} for n, s in series.items()},
    }
    doc["plot"] = "soak-rss.png" if plot(series, report_dir / "soak-rss.png") else None
    path = report_dir / "soak-report.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def _say(message: str) -> None:
    print(message, flush=True)  # noqa: T201 - the command's output


def run(settings: SoakSettings) -> int:
    """Soak the stack of `settings.run_dir`; print the findings, write the report."""
    try:
        target = Target(settings.run_dir.resolve())
    except (NoRunningStack, FileNotFoundError) as exc:
        _say(f"tokenpulse soak: error: {exc}")
        return 2
    _say(f"soaking {target.state.url('gateway_port')} for {settings.minutes:g} min at "
         f"{settings.rps:g} req/s ...")  # fmt: skip
    result, series = soak(target, settings)
    _say(summary(result))
    _say(f"report: {write_report(result, series, settings.report_dir)}")
    return 0 if result.passed else 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per SoakSettings field."""
    add_settings_arguments(parser, SoakSettings, style=KEBAB)


def main(args: argparse.Namespace) -> int:
    """Build the settings from flags and environment, then soak."""
    return run(settings_from_args(SoakSettings, args))
