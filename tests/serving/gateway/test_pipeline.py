"""Deadlines: client timeouts become the upstream timeout; an upstream timeout is a 504."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import openai
import pytest

from devtools.standins.tfserving import TfServingStandin
from serving.gateway.breaker import BreakerState
from serving.gateway.errors import BadRequest
from serving.gateway.pipeline import deadline_for
from serving.gateway.settings import GatewaySettings
from tests.serving.gateway.helpers import auth, metric_value
from tests.support.gateway import running_gateway


def _settings(keys_file: Path) -> GatewaySettings:
    keys_file.write_text('{"keys": []}')
    return GatewaySettings(keys_file=keys_file, request_timeout_s=30, max_request_timeout_s=60)


def test_deadline_from_headers(tmp_path: Path) -> None:
    s = _settings(tmp_path / "k.json")
    assert deadline_for({}, 0.0, s).at == 30 and not deadline_for({}, 0.0, s).from_client
    short = deadline_for({"X-Request-Timeout": "2.5"}, 0.0, s)
    assert short.at == 2.5 and short.from_client
    assert deadline_for({"X-Request-Timeout": "45"}, 0.0, s).at == 45  # may extend up to the max
    assert deadline_for({"X-Request-Timeout": "60"}, 0.0, s).at == 60
    assert deadline_for({"X-Stainless-Read-Timeout": "600"}, 0.0, s).at == 30  # SDK only shortens
    assert deadline_for({"X-Stainless-Read-Timeout": "5"}, 0.0, s).at == 5
    for bad in ("soon", "0", "-1", "nan", "inf"):
        with pytest.raises(BadRequest):
            deadline_for({"X-Request-Timeout": bad}, 0.0, s)


@pytest.mark.parametrize("outside", ["0.5", "60.5", "999"])
def test_timeout_outside_the_declared_range_is_refused_not_clamped(
    tmp_path: Path, outside: str
) -> None:
    s = _settings(tmp_path / "k.json")
    with pytest.raises(BadRequest, match="between 1 and 60 seconds") as caught:
        deadline_for({"X-Request-Timeout": outside}, 0.0, s)
    assert caught.value.param == "X-Request-Timeout"


def test_client_deadline_becomes_504_without_tripping_the_breaker(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    standin.state.delay_s = 3.0
    settings = {"breaker_failure_threshold": 1}
    with running_gateway(standin.url, keys_file, **settings) as gw:
        resp = httpx.post(
            f"{gw.url}/v1/generate",
            json={"prompt": "hi", "max_new_tokens": 2},
            headers={**auth(keys["demo"]), "X-Request-Timeout": "1"},
            timeout=10,
        )
        assert resp.status_code == 504
        assert resp.json()["error"]["code"] == "deadline_exceeded"
        assert resp.json()["error"]["message"].startswith("deadline exceeded")
        assert metric_value(gw.url, "tokenpulse_gateway_circuit_breaker_state") == 0
        bad = httpx.post(
            f"{gw.url}/v1/generate",
            json={"prompt": "hi"},
            headers={**auth(keys["demo"]), "X-Request-Timeout": "later"},
        )
        assert bad.status_code == 400


def test_gateway_timeout_is_504_and_counts_against_the_upstream(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    standin.state.delay_s = 2.0
    settings = {"request_timeout_s": 0.3, "breaker_failure_threshold": 1}
    with running_gateway(standin.url, keys_file, **settings) as gw:
        resp = httpx.post(
            f"{gw.url}/v1/completions",
            json={"model": "gen", "prompt": "hi", "max_tokens": 2},
            headers=auth(keys["demo"]),
            timeout=10,
        )
        assert resp.status_code == 504
        assert resp.json()["error"]["type"] == "server_error"
        assert metric_value(gw.url, "tokenpulse_gateway_circuit_breaker_state") == BreakerState.OPEN


def test_openai_sdk_timeout_becomes_the_upstream_deadline(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    standin.state.delay_s = 3.0
    with running_gateway(standin.url, keys_file) as gw:
        client = openai.OpenAI(
            base_url=f"{gw.url}/v1", api_key=keys["demo"], max_retries=0, timeout=0.5
        )
        # whichever gives up first: the SDK (timeout) or the gateway (504 at the same deadline)
        with pytest.raises((openai.APITimeoutError, openai.InternalServerError)):
            client.completions.create(model="gen", prompt="hi", max_tokens=2)
        for _ in range(50):  # the gateway gave up on the upstream at the SDK's deadline too
            logs = gw.access_logs()
            if logs:
                break
            time.sleep(0.1)
    (entry,) = logs
    # only the SDK's 0.5 s can have expired: the default deadline is 30 s, the upstream takes 3
    assert entry["status"] == 504 and entry["error_code"] == "deadline_exceeded"


@pytest.mark.parametrize("status", [400, 403, 409])
def test_an_upstream_refusal_of_a_validated_request_is_a_server_error(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str], status: int
) -> None:
    # 400: TF Serving's FAILED_PRECONDITION or INVALID_ARGUMENT; 403, 409: PERMISSION_DENIED,
    # ABORTED. The gateway validated the request: a refusal of it is the server's fault.
    settings = {"breaker_failure_threshold": 2, "breaker_open_s": 60.0}
    with running_gateway(standin.url, keys_file, **settings) as gw:
        standin.state.fail_status = status
        native = httpx.post(
            f"{gw.url}/v1/generate",
            json={"prompt": "hi", "max_new_tokens": 2},
            headers={**auth(keys["demo"]), "X-Request-ID": "refused-1"},
        )
        assert native.status_code == 502
        err = native.json()["error"]
        assert (err["status"], err["code"], err["request_id"]) == (502, "upstream_rejected",
                                                                   "refused-1")  # fmt: skip
        assert f"upstream {status}" in err["message"] and "stand-in told to fail" in err["message"]
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=keys["demo"], max_retries=0)
        with pytest.raises(openai.InternalServerError) as caught:
            client.completions.create(model="gen", prompt="hi", max_tokens=2)
        assert caught.value.status_code == 502
        assert (caught.value.code, caught.value.type) == ("upstream_rejected", "server_error")
        # both count as server errors: in the availability SLI (5xx) and on the breaker
        assert metric_value(gw.url, "tokenpulse_gateway_requests_total", code="502") == 2
        assert metric_value(gw.url, "tokenpulse_gateway_requests_total", code="422") == 0
        assert metric_value(gw.url, "tokenpulse_gateway_circuit_breaker_state") == BreakerState.OPEN
        calls = standin.predict_calls()
        fast = httpx.post(
            f"{gw.url}/v1/generate", json={"prompt": "hi"}, headers=auth(keys["demo"])
        )
        assert fast.status_code == 503 and fast.json()["error"]["code"] == "circuit_open"
        assert standin.predict_calls() == calls


def test_a_version_gone_between_poll_and_call_is_still_routed_again(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    # a 404 is the one upstream 4xx that is no failure: the version went away, route again
    settings = {"breaker_failure_threshold": 1}
    with running_gateway(standin.url, keys_file, **settings) as gw:
        standin.state.fail_status = 404
        resp = httpx.post(
            f"{gw.url}/v1/generate", json={"prompt": "hi"}, headers=auth(keys["demo"])
        )
        assert resp.status_code == 503 and resp.json()["error"]["code"] == "upstream_unavailable"
        assert standin.predict_calls() == 2  # routed again once
        assert metric_value(gw.url, "tokenpulse_gateway_circuit_breaker_state") == 0


def test_the_window_is_checked_in_the_models_tokens_not_the_prompts_bytes(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    standin.state.bytes_per_token = 4  # a subword model: 400 bytes are 100 tokens
    prompt = "word " * 80
    with running_gateway(standin.url, keys_file, context_window_tokens=128) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=keys["demo"], max_retries=0)
        before = standin.predict_calls()
        done = client.completions.create(model="gen", prompt=prompt, max_tokens=16)
        assert done.usage.prompt_tokens == 100  # 400 bytes: the byte bound alone would refuse
        assert standin.predict_calls() - before == 2  # the count (a prefill), then the answer
        chat = client.chat.completions.create(
            model="gen", messages=[{"role": "user", "content": prompt}]
        )  # no max_tokens: the rest of the window the model's count leaves (the stand-in
        # answers as many tokens as it is asked for)
        turn = len(f"User: {prompt}<|endofturn|>\nAssistant: ".encode())
        assert chat.usage.completion_tokens == 128 - (-(-turn // 4) + 1)
        with pytest.raises(openai.BadRequestError) as refused:
            client.completions.create(model="gen", prompt=prompt, max_tokens=28)
        assert refused.value.status_code == 400 and refused.value.code == "context_length_exceeded"
        assert refused.value.body["message"].startswith(  # type: ignore[index]
            "This model's maximum context length is 128 tokens. However, you requested 129 "
            "tokens (101 in the prompt, 28 in the completion)."
        )
        before = standin.predict_calls()
        short = client.completions.create(model="gen", prompt="hi", max_tokens=16)
        assert short.usage.prompt_tokens == 1 and standin.predict_calls() - before == 1
