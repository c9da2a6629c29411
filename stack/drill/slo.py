"""Drills on the gateway's SLOs and quality baselines: slow upstream, error burst, idle night.

The slow and failing upstream come from the fault proxy between the gateway and the model server
(`up --fault-proxy-port`, stack/drill/proxy.py): no fault path in production code.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from stack.drill.scenario import Expect, Log, Scenario
from stack.drill.target import Target

SLOW_S = 3.0  # above the latency SLO's 2.5 s, far below the gateway's 30 s request deadline


class SlowUpstream(Scenario):
    """Every answer takes 3 s: the latency budget burns and pages; it resolves once fast."""

    name = "slow-upstream"
    summary = f"the fault proxy delays every upstream call by {SLOW_S:g} s"
    expect = (Expect("TokenPulseGatewayLatencyBudgetBurn"),)
    # 3 s for 4 tokens is also 0.75 s per token: the per-token SLO burns as truly
    allow = ("TokenPulseGatewayTokenLatencyBudgetBurn",)

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        target.set_fault(delay_s=SLOW_S)
        try:
            yield
        finally:
            target.set_fault()


class ErrorBurst(Scenario):
    """Every upstream call fails under steady traffic: the availability budget burns and pages.

    The traffic guard (MIN_REQUEST_RATE) is met by the drill's 2 requests/s; the promtool tests
    hold the guard's other side (errors at a trickle do not page).
    """

    name = "error-burst"
    summary = "the fault proxy answers 503 to every upstream call"
    expect = (Expect("TokenPulseGatewayAvailabilityBudgetBurn"),)

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        target.set_fault(error_ratio=1.0)
        try:
            yield
        finally:
            target.set_fault()


def _baselined_series(target: Target) -> list[str]:
    """Every recorded series a baseline is taken of (`X` with an `X_avg_over_time...` rule), and
    those baselines: the quality signals. The SLO ratios have no baseline; NaN while idle is
    what they should record (no requests, no ratio), and nothing averages it over days."""
    names = set(target.recording_rules())
    base = {n for n in names if any(o.startswith(f"{n}_avg_over_time") for o in names)}
    return sorted(base | {n for n in names if any(n.startswith(f"{b}_") for b in base)})


class IdleThenTraffic(Scenario):
    """No traffic for longer than the quality window, then traffic again: nothing pages, and no
    quality series or baseline records NaN (issue 17 A2: one idle window poisoned a week)."""

    name = "idle-then-traffic"
    summary = "no requests for the quality window (30m compressed), then steady traffic"
    rps = 0.0  # the scenario sends its own traffic after the idle spell
    idle_s = 40.0  # the compressed 30m window (30 s) and some
    traffic_s = 15.0
    settle_s = 2.0

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        time.sleep(self.idle_s)
        log.mark("idle_end")
        yield
        with target.traffic(2.0) as traffic:
            time.sleep(self.traffic_s)
        if traffic.failures():
            log.problems.append(f"{traffic.failures()} of {len(traffic.codes)} requests failed")

    def check(self, target: Target, log: Log) -> None:
        series = _baselined_series(target)
        if not series:
            log.problems.append("no baselined quality series in the loaded rules")
        for name in series:
            nan = target.query_range(f"{name} != {name}", log.started, time.time(), "1s")
            if nan:
                log.problems.append(f"{name} recorded NaN while idle")
        current = [n for n in series if "_over_time" not in n]
        live = [n for n in current if target.query(f"{n} == {n}")]
        if not live:
            log.problems.append("no quality series has a value after traffic came back")
        log.remarks.append(f"{len(series)} quality series checked, {len(live)} live after traffic")
