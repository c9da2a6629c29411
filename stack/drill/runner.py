"""Run drill scenarios one after the other against one stack; judge each; table and JSON report."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stack.drill.scenario import Expect, Log, Scenario
from stack.drill.target import DrillError, Note, Target, is_watchdog, wait_for

QUIET_TIMEOUT_S = 180.0  # a previous scenario's alerts resolve before the next fault starts
# How late the drill may notice the end of a fault: a fault `up` undoes itself (a restart) shows
# in its state file only after the new process is healthy, and the drill polls that every 0.5 s,
# while Prometheus may scrape the new process and the page resolve at the receiver first (a CI run
# saw TfServingDown's resolution arrive as the drill marked the restart). A resolution this much
# before the mark counts, if it came after the page it resolves.
OFF_SEEN_LATE_S = 5.0


@dataclass
class Outcome:
    """One expected page: when it fired and resolved, seconds after the fault went on / off."""

    alertname: str
    receiver: str
    fired_after_s: float | None = None
    resolved_after_s: float | None = None
    labels: dict[str, str] | None = None  # the alert that fired: only its own resolve counts
    fired_at: float | None = None  # when its page arrived (epoch seconds)


@dataclass
class Result:
    """The verdict on one scenario."""

    name: str
    summary: str
    passed: bool = False
    expected: list[Outcome] = field(default_factory=list)
    unexpected_pages: list[str] = field(default_factory=list)
    other_notifications: list[str] = field(default_factory=list)  # tickets, chat: not judged
    problems: list[str] = field(default_factory=list)
    remarks: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    requests: int = 0
    failed_requests: int = 0
    took_s: float = 0.0


def _arrived(
    notes: list[Note], e: Expect, status: str, after: float, labels: dict[str, str] | None = None
) -> Note | None:
    """The first note of `e` with `status` since `after`; with `labels`, of that alert only (an
    earlier fault's alert of the same name, e.g. another version's, resolving is not this one)."""
    for n in notes:
        if n.at >= after and n.alertname == e.alertname and n.receiver == e.receiver:
            if n.status == status and (labels is None or n.labels == labels):
                return n
    return None


def wait_quiet(target: Target, timeout_s: float = QUIET_TIMEOUT_S) -> list[str]:
    """Wait until no critical alert fires or is pending (the Watchdog aside); what still does.

    Tickets and chat messages a previous fault left (its slower tiers) may go on: they do not
    page, and only pages are judged.
    """

    def loud() -> list[str]:
        return sorted(
            {
                a["alertname"]
                for a in target.firing(pending=True)  # a slower tier still pending fires later
                if a.get("severity") == "critical" and not is_watchdog(a["alertname"])
            }
        )

    wait_for(lambda: not loud(), timeout_s, every_s=1.0)
    return loud()


def _wait_all(
    target: Target,
    todo: list[tuple[Outcome, Expect]],
    status: str,
    since: float,
    bound: float,
    looking_back_s: float = 0.0,
) -> None:
    """Wait until each outcome's note with `status` arrived; timings count from `since`, and a
    resolution may come up to `looking_back_s` before it, never before its own page."""

    def pending() -> list[tuple[Outcome, Expect]]:
        notes = target.notes()
        left = []
        for outcome, e in todo:
            after = since
            if status == "resolved" and outcome.fired_at is not None:
                after = max(since - looking_back_s, outcome.fired_at)
            note = _arrived(notes, e, status, after, outcome.labels)
            if note is None:
                left.append((outcome, e))
            elif status == "firing":
                outcome.fired_after_s = round(note.at - since, 1)
                outcome.fired_at = note.at
                outcome.labels = note.labels
            else:
                outcome.resolved_after_s = round(note.at - since, 1)
        return left

    wait_for(lambda: not pending(), bound, every_s=0.5)


def run_one(target: Target, scenario: Scenario, say: Callable[[str], None]) -> Result:
    """Apply one scenario's fault under traffic and judge what reached the on-call receiver."""
    result = Result(scenario.name, scenario.summary)
    began = time.monotonic()
    try:
        _run(target, scenario, result, say)
    except DrillError as exc:
        result.problems.append(str(exc))
    result.took_s = round(time.monotonic() - began, 1)
    result.passed = not result.problems and not result.unexpected_pages
    return result


def _run(target: Target, scenario: Scenario, result: Result, say: Callable[[str], None]) -> None:
    rules = target.alert_rules()
    expected = scenario.expected(target)
    missing = [e.alertname for e in expected if e.rule and e.alertname not in rules]
    if missing:
        result.problems.append(f"no alerting rule {', '.join(missing)} in the loaded rules")
        return
    still = wait_quiet(target)
    if still:
        result.remarks.append(f"not quiet before the fault: {', '.join(still)} firing")
    outcomes = [(Outcome(e.alertname, e.receiver), e) for e in expected]
    result.expected = [o for o, _ in outcomes]
    log = Log()
    first = len(target.notes())
    say(f"{scenario.name}: fault on ({scenario.summary})")
    with target.traffic(scenario.rps, label=scenario.label) as traffic:
        with scenario.fault(target, log):
            on = time.time()
            log.mark("fault_on")
            _wait_all(target, outcomes, "firing", on, scenario.fire_within_s)
        # a scenario whose fault `up` itself undoes records when that happened; the rest of
        # its exit (waiting for slower restarts) does not delay the resolution's clock
        off = log.fault_removed_at = log.fault_removed_at or time.time()
        log.timings["fault_off"] = round(off - log.started, 1)
        say(f"{scenario.name}: fault off")
        fired = [(o, e) for o, e in outcomes if o.fired_after_s is not None]
        _wait_all(target, fired, "resolved", off, scenario.resolve_within_s, OFF_SEEN_LATE_S)
        time.sleep(scenario.settle_s)
    scenario.check(target, log)
    for o, _ in outcomes:
        if o.fired_after_s is None:
            result.problems.append(
                f"{o.alertname} did not arrive on {o.receiver} within {scenario.fire_within_s:g} s"
            )
        elif o.resolved_after_s is None:
            result.problems.append(
                f"{o.alertname} did not resolve within {scenario.resolve_within_s:g} s"
            )
    wanted = {e.alertname for e in expected} | set(scenario.allow)
    pages = [n for n in target.notes()[first:] if n.is_page and n.alertname not in wanted]
    result.unexpected_pages = sorted({f"{n.alertname} -> {n.receiver}" for n in pages})
    if pages:
        result.remarks += _evidence(target, pages, log.started)
    others = [n for n in target.notes()[first:] if n.status == "firing" and not n.is_page]
    result.other_notifications = sorted(
        {f"{n.alertname} -> {n.receiver}" for n in others if not is_watchdog(n.alertname)}
    )
    result.problems += log.problems
    result.remarks += log.remarks
    result.timings = log.timings
    result.requests, result.failed_requests = len(traffic.codes), traffic.failures()


def _evidence(target: Target, pages: list[Note], since: float) -> list[str]:
    """For a page nobody expected: when it came, and every target whose `up` changed meanwhile
    (a scrape that failed is an outage to the rules), seconds after the scenario's start."""
    lines = [f"{n.alertname} paged at {n.at - since:.1f}s" for n in pages]
    try:
        series = target.query_range("up", since - 5, time.time(), "1s")
    except DrillError as exc:
        return [*lines, f"no `up` history: {exc}"]
    for s in series:
        changes, last = [], None
        for at, value in s["values"]:
            if value != last:
                changes.append(f"{value}@{float(at) - since:.0f}s")
                last = value
        if len(changes) > 1:
            who = f"{s['metric'].get('job', '?')} {s['metric'].get('instance', '')}".strip()
            lines.append(f"up of {who}: {' '.join(changes)}")
    return lines


def run_all(
    target: Target, scenarios: Sequence[Scenario], say: Callable[[str], None]
) -> list[Result]:
    """Every scenario in order, on the same stack."""
    results = []
    for scenario in scenarios:
        result = run_one(target, scenario, say)
        say(f"{scenario.name}: {'PASS' if result.passed else 'FAIL'} ({result.took_s:g} s)")
        results.append(result)
    return results


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def _marks(r: Result) -> str:
    # the scenario's own marks, seconds after its start (fault on/off are in the columns)
    marks = {k: v for k, v in r.timings.items() if k not in ("fault_on", "fault_off")}
    return " ".join(f"{k.removesuffix('_s')}={v:g}s" for k, v in marks.items())


def table(results: Sequence[Result]) -> str:
    """The pass/fail table: one row per expected page, problems under a failed scenario."""
    head = ("scenario", "result", "expected page -> route", "fired", "resolved", "took", "marks")
    rows: list[tuple[str, ...]] = []
    for r in results:
        verdict = "PASS" if r.passed else "FAIL"
        pages = r.expected or [Outcome("(no page)", "-")]
        for i, o in enumerate(pages):
            page = f"{o.alertname} -> {o.receiver}" if o.receiver != "-" else o.alertname
            rows.append(
                (
                    r.name if i == 0 else "",
                    verdict if i == 0 else "",
                    page,
                    _secs(o.fired_after_s),
                    _secs(o.resolved_after_s),
                    f"{r.took_s:.0f}s" if i == 0 else "",
                    _marks(r) if i == 0 else "",
                )
            )
        for problem in [*r.problems, *(f"unexpected page: {p}" for p in r.unexpected_pages)]:
            rows.append(("", "", f"  ! {problem}", "", "", "", ""))
        if not r.passed:  # what the scenario saw, to tell a fault from a flaw in the drill
            rows += [("", "", f"  . {remark}", "", "", "", "") for remark in r.remarks]
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in [head, *rows]]  # fmt: skip
    passed = sum(r.passed for r in results)
    lines.append(f"{passed}/{len(results)} scenarios passed")
    return "\n".join(lines)


def report(results: Sequence[Result], run_dir: Path, path: Path) -> dict[str, Any]:
    """Write drill-report.json; the document."""
    doc = {
        "stack": str(run_dir),
        "finished_at": datetime.now(UTC).isoformat(),
        "passed": all(r.passed for r in results),
        "scenarios": [asdict(r) for r in results],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return doc
