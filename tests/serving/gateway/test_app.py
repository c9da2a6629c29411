"""The HTTP surface: every kind of bad input gets its status in the endpoint's error shape."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from devtools.standins.tfserving import TfServingStandin
from tests.serving.gateway.helpers import auth, metric_value
from tests.support.gateway import GatewayProcess, make_keys_file, running_gateway


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess, str]]:
    """One gateway with small limits in front of a stand-in, shared by this module."""
    path = tmp_path_factory.mktemp("app") / "keys.json"
    key = make_keys_file(path, demo={})["demo"]
    with (
        TfServingStandin() as up,
        running_gateway(
            up.url, path, max_body_bytes=4096, max_prompt_chars=100, max_new_tokens_limit=64
        ) as gw,
    ):
        yield gw, key


def _post(gw: GatewayProcess, key: str, path: str, content: bytes) -> httpx.Response:
    headers = {**auth(key), "Content-Type": "application/json"}
    return httpx.post(f"{gw.url}{path}", content=content, headers=headers)


NATIVE_CASES = [
    (b"{", 400, "malformed json"),
    (b'{"prompt": "\xff\xfe"}', 400, "malformed json"),
    (b'{"prompt": "\\ud800"}', 400, "malformed json"),
    (b"[]", 422, "body"),
    (b"{}", 422, "prompt"),
    (b'{"prompt": 5}', 422, "prompt"),
    (b'{"prompt": ""}', 422, "prompt"),
    (b'{"prompt": "a", "temperature": -1}', 422, "temperature"),
    (b'{"prompt": "a", "temperature": "hot"}', 422, "temperature"),
    (b'{"prompt": "a", "top_p": 0}', 422, "top_p"),
    (b'{"prompt": "a", "max_new_tokens": 0}', 422, "max_new_tokens"),
    (b'{"prompt": "a", "max_new_tokens": 65}', 422, "max_new_tokens"),
    (b'{"prompt": "a", "max_new_tokens": 2.5}', 422, "max_new_tokens"),
    (b'{"prompt": "a", "max_new_tokens": "2"}', 422, "max_new_tokens"),
    (b'{"prompt": "a", "max_new_tokens": true}', 422, "max_new_tokens"),
    (b'{"prompt": "a", "seed": 99999999999999999999}', 422, "seed"),
    (b'{"prompt": "a", "version_label": "../x"}', 422, "version_label"),
    (b'{"prompt": "a", "bogus": 1}', 422, "bogus"),
    (json.dumps({"prompt": "x" * 101}).encode(), 413, "101 characters"),
    (json.dumps({"prompt": "x" * 5000}).encode(), 413, "larger than 4096 bytes"),
]


@pytest.mark.parametrize(("body", "status", "words"), NATIVE_CASES)
def test_native_bad_input(
    served: tuple[GatewayProcess, str], body: bytes, status: int, words: str
) -> None:
    gw, key = served
    resp = _post(gw, key, "/v1/generate", body)
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert err["status"] == status and words in err["message"]
    assert err["request_id"] == resp.headers["X-Request-ID"]


OPENAI_CASES = [
    (b"{", 400, "malformed json"),
    (b'{"model": "gen"}', 400, "prompt"),
    (b'{"model": "gen", "prompt": [1, 2]}', 400, "prompt"),
    (b'{"model": "gen", "prompt": []}', 400, "prompt"),
    (b'{"model": "gen", "prompt": "a", "n": 3}', 400, "n: 3 is not supported"),
    (b'{"model": "gen", "prompt": "a", "stream_options": {}}', 400, "stream_options"),
    (b'{"model": "gen", "prompt": "a", "logprobs": 2}', 400, "logprobs"),
    (b'{"model": "gen", "prompt": "a", "stop": ["", "x"]}', 400, "stop"),
    (b'{"model": "gen", "prompt": "a", "max_tokens": 1000}', 400, "max_tokens"),
    (b'{"model": "nope", "prompt": "a"}', 404, "not served"),
    (
        json.dumps({"model": "gen", "prompt": "a" * 70, "max_tokens": 64}).encode(),
        400,
        "However, you requested 135 tokens (71 in the prompt, 64 in the completion)",
    ),
    (json.dumps({"model": "gen", "prompt": ["a"] * 17}).encode(), 400, "at most 16"),
]


@pytest.mark.parametrize(("body", "status", "words"), OPENAI_CASES)
def test_openai_bad_input(
    served: tuple[GatewayProcess, str], body: bytes, status: int, words: str
) -> None:
    gw, key = served
    resp = _post(gw, key, "/v1/completions", body)
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == "invalid_request_error" and words in err["message"]


def test_no_bad_input_reached_the_server_error_path(served: tuple[GatewayProcess, str]) -> None:
    gw, _ = served
    assert metric_value(gw.url, "tokenpulse_gateway_requests_total", code="500") == 0
    assert "unhandled error" not in gw.stderr()


def test_request_id_is_echoed_and_logs_hold_no_prompt(served: tuple[GatewayProcess, str]) -> None:
    gw, key = served
    resp = httpx.post(
        f"{gw.url}/v1/generate",
        json={"prompt": "my secret prompt", "max_new_tokens": 2},
        headers={**auth(key), "X-Request-ID": "req-42"},
    )
    assert resp.status_code == 200
    assert resp.headers["X-Request-ID"] == "req-42" and resp.json()["id"] == "gen-req-42"
    (entry,) = [e for e in gw.access_logs() if e["request_id"] == "req-42"]
    assert entry["key_id"] == "demo" and entry["status"] == 200 and entry["version"] == "1"
    assert entry["total_s"] >= entry["upstream_s"] > 0
    assert "my secret prompt" not in gw.stderr() and key not in gw.stderr()


def test_openai_sdk_against_the_gateway(served: tuple[GatewayProcess, str]) -> None:
    gw, key = served
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0)
    done = client.completions.create(model="gen", prompt="hi", max_tokens=3, stop=" world")
    assert done.object == "text_completion"
    assert done.choices[0].text == "hello" and done.choices[0].finish_reason == "stop"
    assert done.usage is not None and done.usage.completion_tokens == 3
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model="gen", prompt="hi", max_tokens=3, n=2)
    assert err.value.status_code == 400 and err.value.param == "n"
    with pytest.raises(openai.AuthenticationError) as unauth:
        openai.OpenAI(
            base_url=f"{gw.url}/v1", api_key="tp-wrong", max_retries=0
        ).completions.create(model="gen", prompt="hi")
    assert unauth.value.code == "invalid_api_key"


def test_health_ready_and_openapi(served: tuple[GatewayProcess, str]) -> None:
    gw, _ = served
    assert httpx.get(f"{gw.url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{gw.url}/readyz")
    assert ready.status_code == 200 and ready.json()["models"]["gen"]["available_versions"] == ["1"]
    spec = httpx.get(f"{gw.url}/openapi.json").json()
    assert spec["openapi"].startswith("3.1")
    assert {"/v1/generate", "/v1/completions", "/healthz", "/readyz", "/metrics"} <= set(
        spec["paths"]
    )
    assert "GenerateRequest" in spec["components"]["schemas"]


def test_readyz_is_the_pods_own_state_not_the_upstreams(
    keys_file: Path, keys: dict[str, str]
) -> None:
    """No AVAILABLE version upstream: the gateway stays in its Service (200) and answers with its
    typed errors; the body says the upstream is not ready, and says it again once it is."""
    with TfServingStandin() as up:
        up.state.versions["gen"] = {1: "LOADING"}
        with running_gateway(up.url, keys_file) as gw:
            ready = httpx.get(f"{gw.url}/readyz")
            assert ready.status_code == 200
            assert ready.json()["status"] == "ready" and ready.json()["draining"] is False
            assert ready.json()["upstream_ready"] is False
            assert ready.json()["upstream_reachable"] is True
            resp = httpx.post(
                f"{gw.url}/v1/generate", json={"prompt": "a"}, headers=auth(keys["demo"])
            )
            assert (
                resp.status_code == 503 and resp.json()["error"]["code"] == "upstream_unavailable"
            )
            up.state.versions["gen"] = {1: "AVAILABLE"}
            ready = httpx.get(f"{gw.url}/readyz")
            assert ready.status_code == 200 and ready.json()["upstream_ready"] is True


def test_unknown_paths_and_wrong_methods_get_json_errors(
    served: tuple[GatewayProcess, str],
) -> None:
    gw, key = served
    # under /v1/ (OpenAI's API): OpenAI's error shape, which the openai SDK reads
    missing = httpx.get(f"{gw.url}/v1/nope")
    assert missing.status_code == 404
    assert missing.json() == {"error": {
        "message": "GET /v1/nope: not found", "type": "invalid_request_error", "param": None,
        "code": "not_found",
    }}  # fmt: skip
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0)
    with pytest.raises(openai.NotFoundError) as err:
        client.embeddings.create(model="gen", input="hi")
    assert err.value.code == "not_found"
    wrong = httpx.post(f"{gw.url}/v1/models")
    assert wrong.status_code == 405 and "GET" in wrong.headers["Allow"]
    assert set(wrong.json()["error"]) == {"message", "type", "param", "code"}
    # the native API keeps its own shape
    native = httpx.get(f"{gw.url}/v1/generate")
    assert native.status_code == 405 and "POST" in native.headers["Allow"]
    assert native.json()["error"]["message"].startswith("GET /v1/generate")
    assert native.json()["error"]["status"] == 405


def test_health_answers_as_vllms_probe(served: tuple[GatewayProcess, str]) -> None:
    gw, _ = served
    resp = httpx.get(f"{gw.url}/health")
    assert resp.status_code == 200 and resp.content == b""


RATE_HEADERS = {
    f"x-ratelimit-{what}-{kind}"
    for what in ("limit", "remaining", "reset")
    for kind in ("requests", "tokens")
}


def test_every_keyed_response_carries_openais_rate_limit_headers(
    served: tuple[GatewayProcess, str],
) -> None:
    gw, key = served
    body = {"model": "gen", "prompt": "hi", "max_tokens": 3}
    first = httpx.post(f"{gw.url}/v1/completions", json=body, headers=auth(key))
    second = httpx.post(f"{gw.url}/v1/completions", json=body, headers=auth(key))
    assert first.status_code == second.status_code == 200
    assert RATE_HEADERS <= set(first.headers)
    assert first.headers["x-ratelimit-limit-requests"] == "600"
    assert first.headers["x-ratelimit-limit-tokens"] == "60000"
    assert int(first.headers["x-ratelimit-remaining-requests"]) <= 599  # refills at 10/s
    assert re.fullmatch(r"\d+(ms|s)|\d+m\d+s", first.headers["x-ratelimit-reset-requests"])
    refused = httpx.post(f"{gw.url}/v1/completions", json={**body, "n": 2}, headers=auth(key))
    assert refused.status_code == 400 and RATE_HEADERS <= set(refused.headers)
    listed = httpx.get(f"{gw.url}/v1/models", headers=auth(key))
    assert RATE_HEADERS <= set(listed.headers)
    assert not RATE_HEADERS & set(httpx.post(f"{gw.url}/v1/completions", json=body).headers)


def test_every_503_and_429_carries_retry_after(keys_file: Path, keys: dict[str, str]) -> None:
    with TfServingStandin() as up:
        up.state.versions["gen"] = {1: "LOADING"}
        with running_gateway(up.url, keys_file) as gw:
            resp = httpx.post(
                f"{gw.url}/v1/completions", json={"model": "gen", "prompt": "a"},
                headers=auth(keys["demo"]),
            )  # fmt: skip
            assert resp.status_code == 503 and int(resp.headers["Retry-After"]) >= 1
            up.state.versions["gen"] = {1: "AVAILABLE"}
            limited = [
                httpx.post(
                    f"{gw.url}/v1/generate", json={"prompt": "a"}, headers=auth(keys["limited"])
                )
                for _ in range(3)
            ]
            assert limited[-1].status_code == 429 and int(limited[-1].headers["Retry-After"]) >= 1
            # 2 requests a minute: the buckets say so, request by request
            remaining = [r.headers["x-ratelimit-remaining-requests"] for r in limited]
            assert remaining == ["1", "0", "0"]
            assert limited[0].headers["x-ratelimit-limit-requests"] == "2"


def _series(gw: GatewayProcess) -> int:
    text = httpx.get(f"{gw.url}/metrics").text
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def test_bogus_model_names_do_not_grow_the_metrics_page(
    served: tuple[GatewayProcess, str],
) -> None:
    gw, key = served
    with httpx.Client(base_url=gw.url, headers=auth(key)) as client:
        for route, body in (("generate", {"prompt": "hi"}), ("completions", {"prompt": "hi"})):
            client.post(f"/v1/{route}", json={**body, "model": "warm-up"})
        before = _series(gw)
        for i in range(1000):
            route, field = ("generate", "prompt") if i % 2 else ("completions", "prompt")
            resp = client.post(f"/v1/{route}", json={field: "hi", "model": f"bogus-{i}"})
            assert resp.status_code == 404
    assert _series(gw) == before
    assert metric_value(gw.url, "tokenpulse_gateway_requests_total", model="__unknown__") >= 1000
    assert "bogus-" not in httpx.get(f"{gw.url}/metrics").text


def test_a_unary_client_that_hangs_up_cancels_its_request_as_499(
    keys_file: Path, keys: dict[str, str]
) -> None:
    with TfServingStandin() as up:
        up.state.delay_s = 2.0
        with running_gateway(up.url, keys_file) as gw:
            body = {"model": "gen", "prompt": "a", "max_tokens": 2}
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(f"{gw.url}/v1/completions", json=body, headers=auth(keys["demo"]),
                           timeout=0.3)  # fmt: skip
            time.sleep(0.6)  # well before the upstream's 2 s answer
            assert (
                metric_value(
                    gw.url, "tokenpulse_gateway_requests_total", route="completions", code="499"
                )
                == 1
            )
            assert metric_value(gw.url, "tokenpulse_gateway_client_disconnects_total") == 1
            assert metric_value(gw.url, "tokenpulse_gateway_in_flight_requests") == 0
            (entry,) = [e for e in gw.access_logs() if e.get("status") == 499]
            assert entry["total_s"] < 1.0
