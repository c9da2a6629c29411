"""Per-key request and token buckets: unit behaviour on a fake clock, and 429 over HTTP."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from devtools.standins.tfserving import TfServingStandin
from serving.gateway.ratelimit import BudgetTooLarge, RateLimiter, TokenBucket, retry_after_header
from tests.serving.gateway.helpers import auth, metric_value
from tests.support.gateway import make_keys_file, running_gateway


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_bucket_refills_at_capacity_per_minute() -> None:
    clock = FakeClock()
    bucket = TokenBucket(60, clock)
    bucket.take(60)
    assert bucket.wait_for(1) == pytest.approx(1.0)
    clock.now += 0.5
    assert bucket.wait_for(1) == pytest.approx(0.5)
    clock.now += 120
    assert bucket.wait_for(60) == 0.0  # never above capacity
    with pytest.raises(BudgetTooLarge):
        bucket.wait_for(61)


def test_limiter_reserves_tokens_and_refunds_unused() -> None:
    clock = FakeClock()
    limiter = RateLimiter(clock)
    kw = {"requests_per_minute": 100, "tokens_per_minute": 100}
    res, wait, _ = limiter.acquire("k", tokens=80, **kw)
    assert res is not None and wait == 0
    refused, wait, which = limiter.acquire("k", tokens=30, **kw)
    assert refused is None and which == "tokens" and wait == pytest.approx(10 * 60 / 100)
    limiter.refund(res, used=10)  # 70 come back
    again, wait, _ = limiter.acquire("k", tokens=30, **kw)
    assert again is not None and wait == 0


def test_limiter_counts_requests_per_key() -> None:
    limiter = RateLimiter(FakeClock())
    kw = {"requests_per_minute": 2, "tokens_per_minute": 1000, "tokens": 1}
    assert limiter.acquire("a", **kw)[0] is not None
    assert limiter.acquire("a", **kw)[0] is not None
    refused, wait, which = limiter.acquire("a", **kw)
    assert refused is None and which == "requests" and wait == pytest.approx(30)
    assert limiter.acquire("b", **kw)[0] is not None  # other keys are unaffected


def test_retry_after_is_whole_seconds_at_least_one() -> None:
    assert [retry_after_header(s) for s in (0.01, 1.0, 1.2, 29.9)] == ["1", "1", "2", "30"]


def test_request_limit_answers_429_with_retry_after(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    body = {"model": "gen", "prompt": "hi", "max_tokens": 2}
    with running_gateway(standin.url, keys_file) as gw:
        url = f"{gw.url}/v1/completions"
        codes = [httpx.post(url, json=body, headers=auth(keys["limited"])) for _ in range(3)]
        assert [r.status_code for r in codes] == [200, 200, 429]
        refused = codes[-1]
        assert int(refused.headers["Retry-After"]) >= 1
        assert refused.json()["error"]["type"] == "rate_limit_error"
        # a different key still gets through
        assert httpx.post(url, json=body, headers=auth(keys["demo"])).status_code == 200
        assert metric_value(gw.url, "tokenpulse_gateway_rate_limited_total") == 1
    assert standin.predict_calls() == 3


def test_token_limit_reserves_max_new_tokens_and_refunds(
    standin: TfServingStandin, tmp_path: Path
) -> None:
    path = tmp_path / "keys.json"
    key = make_keys_file(path, tok={"tokens_per_minute": 20})["tok"]
    body = {"prompt": "hi", "max_new_tokens": 8}
    standin.state.output_tokens = 1  # 7 of the 8 reserved come back each time
    with running_gateway(standin.url, path) as gw:
        url = f"{gw.url}/v1/generate"
        ok = [httpx.post(url, json=body, headers=auth(key)).status_code for _ in range(5)]
        assert ok == [200] * 5  # without refunds only 2 would fit in 20 tokens
        standin.state.output_tokens = None  # now each request really uses 8
        # 6 x 8 tokens: the bucket (20 a minute, refilled as time passes) cannot hold them even
        # if a busy machine spends seconds between the calls (3 calls did fit on one such run)
        codes = [httpx.post(url, json=body, headers=auth(key)).status_code for _ in range(6)]
        assert 429 in codes
        too_big = httpx.post(url, json={"prompt": "hi", "max_new_tokens": 21}, headers=auth(key))
        assert too_big.status_code == 422
        assert "token limit" in too_big.json()["error"]["message"]
