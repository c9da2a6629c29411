"""Drill version-rejects-all: the model server refuses every predict, while it looks healthy.

TF Serving answers FAILED_PRECONDITION (and INVALID_ARGUMENT) with HTTP 400 when a version cannot
run a request, e.g. a session that failed to initialise, while its status still says AVAILABLE.
The gateway validated every request before it sent it, so the refusal is the server's fault: it
answers 502 `upstream_rejected`, the breaker counts it, and the availability SLI (5xx) burns.
The fault proxy between the gateway and the model server (stack/drill/proxy.py) plays that
server: every `:predict` gets the 400, the status poll passes through untouched.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from stack.drill.scenario import Expect, Log, Scenario
from stack.drill.target import Target

REFUSAL_STATUS = 400  # TF Serving's HTTP status for FAILED_PRECONDITION
REFUSAL = "Failed precondition: the version cannot run this request (drill: injected refusal)"
REQUESTS = "tokenpulse_gateway_requests_total"


class VersionRejectsAll(Scenario):
    """Every predict is refused with TF Serving's 400 under steady traffic: the availability
    budget burns and pages; it resolves once the version answers again."""

    name = "version-rejects-all"
    summary = f"the fault proxy answers every predict {REFUSAL_STATUS} FAILED_PRECONDITION"
    expect = (Expect("TokenPulseGatewayAvailabilityBudgetBurn"),)

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        target.set_fault(
            error_ratio=1.0, error_status=REFUSAL_STATUS, error_message=REFUSAL, scope="predict"
        )
        try:
            yield
        finally:
            target.set_fault()

    def check(self, target: Target, log: Log) -> None:
        """The refusals reached the SLI as server errors (502), none as a client's 422."""
        end = log.fault_removed_at or time.time()
        seconds = max(int(end - log.started), 1)
        counted = {
            code: target_query_value(target, grown(f'{REQUESTS}{{code="{code}"}}', seconds, end))
            for code in ("502", "503", "422")
        }
        if counted["502"] <= 0:
            log.problems.append("the gateway counted no 502 while every predict was refused")
        if counted["422"] > 0:
            log.problems.append(
                f"the gateway answered {counted['422']:g} refusals 422, a client error the "
                "availability SLI does not count"
            )
        # once the breaker opens, most answers are its 503s; its probes meet the refusal (502)
        log.remarks.append(
            f"while the fault was on: about {counted['502']:.0f} answered 502 (upstream_rejected)"
            f", {counted['503']:.0f} 503 (the breaker open)"
        )


def grown(selector: str, seconds: int, at: float) -> str:
    """PromQL: how much `selector` (summed) grew in the `seconds` before `at`: its highest value
    in that range less its value at the range's start (none: 0). increase() needs two samples of
    a series, so a code's series born in the fault (the gateway's first 502) would count nothing
    if the breaker opened before its second scrape."""
    start = at - seconds
    return (
        f"sum(max_over_time({selector}[{seconds}s] @ {at:.3f}))\n"
        f"- (sum({selector} @ {start:.3f}) or vector(0))"
    )


def target_query_value(target: Target, expr: str) -> float:
    """The one value of `expr` per Prometheus (none: 0)."""
    result = target.query(expr)
    return float(result[0]["value"][1]) if result else 0.0
