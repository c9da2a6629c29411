"""Circuit breaker: state machine on a fake clock, and over HTTP with a failing or dead upstream."""

from __future__ import annotations

from pathlib import Path

import httpx

from devtools.standins.tfserving import TfServingStandin
from serving.gateway.breaker import BreakerState, CircuitBreaker
from stack.launch import wait_until
from tests.serving.gateway.helpers import auth, metric_value
from tests.support.gateway import running_gateway

STATE = "tokenpulse_gateway_circuit_breaker_state"


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_opens_after_consecutive_failures_then_probes() -> None:
    clock = FakeClock()
    changes: list[BreakerState] = []
    br = CircuitBreaker(3, 10.0, clock, on_change=changes.append)
    for _ in range(2):
        br.record_failure()
    br.record_success()  # resets the streak
    for _ in range(3):
        assert br.allow()
        br.record_failure()
    assert br.state is BreakerState.OPEN and not br.allow()
    assert br.retry_after() == 10.0
    clock.now = 10.0
    assert br.state is BreakerState.HALF_OPEN
    assert br.allow()  # the one probe
    assert not br.allow()  # everyone else still fails fast
    br.record_failure()  # probe failed: open again, full cool-down
    assert br.state is BreakerState.OPEN and br.retry_after() == 10.0
    clock.now = 20.0
    assert br.allow()
    br.record_success()
    assert br.state is BreakerState.CLOSED and br.allow() and br.allow()
    assert changes == [
        BreakerState.OPEN,
        BreakerState.HALF_OPEN,
        BreakerState.OPEN,
        BreakerState.HALF_OPEN,
        BreakerState.CLOSED,
    ]


def test_neutral_outcome_frees_the_probe() -> None:
    clock = FakeClock()
    br = CircuitBreaker(1, 1.0, clock)
    br.record_failure()
    clock.now = 1.0
    assert br.allow() and not br.allow()
    br.record_neutral()
    assert br.allow()


def _generate(url: str, key: str) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/generate", json={"prompt": "hi", "max_new_tokens": 2}, headers=auth(key)
    )


def test_failing_upstream_opens_the_breaker_and_calls_stop(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    settings = {"breaker_failure_threshold": 3, "breaker_open_s": 30.0}
    with running_gateway(standin.url, keys_file, **settings) as gw:
        assert _generate(gw.url, keys["demo"]).status_code == 200
        standin.state.fail_status = 500
        codes = [_generate(gw.url, keys["demo"]).status_code for _ in range(3)]
        assert codes == [502, 502, 502]
        assert metric_value(gw.url, STATE) == BreakerState.OPEN
        calls = standin.predict_calls()
        fast = [_generate(gw.url, keys["demo"]) for _ in range(5)]
        assert {r.status_code for r in fast} == {503}
        assert {r.json()["error"]["code"] for r in fast} == {"circuit_open"}
        assert all(int(r.headers["Retry-After"]) >= 1 for r in fast)
        assert standin.predict_calls() == calls  # open: no upstream call at all
        assert metric_value(gw.url, "tokenpulse_gateway_circuit_breaker_rejected_total") == 5


def test_killed_model_server_opens_and_its_return_closes(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    # a cool-down long enough that the checks of the open state below finish inside it on a
    # busy machine (at 1 s, one run saw it half-open by the /readyz check)
    settings = {"breaker_failure_threshold": 2, "breaker_open_s": 5.0}
    with running_gateway(standin.url, keys_file, **settings) as gw:
        assert _generate(gw.url, keys["demo"]).status_code == 200
        assert metric_value(gw.url, STATE) == BreakerState.CLOSED
        standin.stop()  # the upstream is gone: connections are refused
        down = [_generate(gw.url, keys["demo"]) for _ in range(2)]
        assert [r.json()["error"]["code"] for r in down] == ["upstream_unavailable"] * 2
        assert _generate(gw.url, keys["demo"]).json()["error"]["code"] == "circuit_open"
        assert metric_value(gw.url, STATE) == BreakerState.OPEN
        # the gateway itself stays ready (its typed errors beat a load balancer's bare 503);
        # the body says what it sees upstream
        ready = httpx.get(f"{gw.url}/readyz")
        assert ready.status_code == 200 and ready.json()["circuit_breaker"] == "open"
        assert ready.json()["upstream_reachable"] is False
        assert ready.json()["upstream_ready"] is False
        standin.start()  # same port
        # once the cool-down is over, the next request is the half-open probe
        wait_until(lambda: metric_value(gw.url, STATE) == BreakerState.HALF_OPEN, 15, "half-open")
        assert _generate(gw.url, keys["demo"]).status_code == 200
        assert metric_value(gw.url, STATE) == BreakerState.CLOSED
        assert httpx.get(f"{gw.url}/readyz").json()["upstream_ready"] is True
