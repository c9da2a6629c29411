"""End to end: the real model server (tiny model) behind a real gateway, with the openai SDK."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.serving.gateway.helpers import auth, metric_value
from tests.support.gateway import (
    GatewayProcess,
    TinyGen,
    free_port,
    make_keys_file,
    running_gateway,
)
from tests.support.models import install_version, tiny_tokens
from tests.support.modelserver import ModelServerProcess
from tokenpulse.tfserving.signature import stop_slots

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, tiny_gen: TinyGen
) -> Iterator[tuple[ModelServerProcess, GatewayProcess, dict[str, str]]]:
    """The shared model server (versions 1 and 2, labels stable/canary) and a gateway in front."""
    tmp = tmp_path_factory.mktemp("e2e")
    keys = make_keys_file(tmp / "keys.json", demo={})
    with running_gateway(
        tiny_gen.server.rest_url,
        tmp / "keys.json",
        model_config_file=str(tiny_gen.config),
        max_new_tokens_limit=32,
        context_window_tokens=128,  # the tiny preset's window
    ) as gw:
        yield tiny_gen.server, gw, keys


def test_openai_sdk_completion(stack: tuple[ModelServerProcess, GatewayProcess, dict]) -> None:
    _, gw, keys = stack
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=keys["demo"], max_retries=0)
    done = client.completions.create(
        model="gen", prompt=["Once upon a time", "The sky"], max_tokens=6, temperature=0, seed=1
    )
    assert len(done.choices) == 2 and [c.index for c in done.choices] == [0, 1]
    assert all(c.finish_reason in ("stop", "length") for c in done.choices)
    assert done.usage is not None and 0 < done.usage.completion_tokens <= 12
    assert done.system_fingerprint == "gen:v1"  # the stable label
    extra = done.model_extra or {}
    assert extra["tokenpulse"]["version"] == "1"
    assert len(extra["tokenpulse"]["signals"]) == 2
    # greedy decoding through the gateway matches the model server called directly
    direct = httpx.post(
        f"{stack[0].rest_url}/v1/models/gen/versions/1:predict",
        json={
            "signature_name": "serving_default",
            "instances": [
                {
                    "prompt": "The sky",
                    "max_new_tokens": 6,
                    "temperature": 0.0,
                    "top_k": 0,
                    "top_p": 1.0,
                    "seed": 1,
                    "stop": stop_slots(),
                    "ignore_eos": 0,
                }
            ],
        },
    ).json()["predictions"][0]
    assert done.choices[1].text == direct["text"]


def test_openai_sdk_errors(stack: tuple[ModelServerProcess, GatewayProcess, dict]) -> None:
    _, gw, keys = stack
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=keys["demo"], max_retries=0)
    with pytest.raises(openai.BadRequestError) as bad:
        client.completions.create(model="gen", prompt="hi", n=2)
    assert bad.value.code == "invalid_request" and "n: 2 is not supported" in bad.value.message
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{gw.url}/v1", api_key="tp-nope", max_retries=0).completions.create(
            model="gen", prompt="hi"
        )
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="nope", prompt="hi", max_tokens=2)


def test_native_generate_signals_and_metrics(
    stack: tuple[ModelServerProcess, GatewayProcess, dict],
) -> None:
    _, gw, keys = stack
    resp = httpx.post(
        f"{gw.url}/v1/generate",
        json={"prompt": "Hello", "max_new_tokens": 8, "version_label": "canary", "seed": 3},
        headers=auth(keys["demo"]),
        timeout=30,
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["model"] == {"name": "gen", "version": "2", "version_label": "canary"}
    assert 0 <= body["usage"]["output_tokens"] <= 8
    assert body["signals"]["mean_nll"] >= 0
    assert 0 <= body["signals"]["repetition_ratio"] <= 1
    t = body["timings"]
    assert 0 < t["upstream_s"] <= t["total_s"]
    labels = {"model": "gen", "version": "2", "route": "generate"}
    assert metric_value(gw.url, "tokenpulse_gateway_requests_total", code="200", **labels) >= 1
    assert (
        metric_value(gw.url, "tokenpulse_gateway_output_tokens_total", **labels)
        == body["usage"]["output_tokens"]
    )
    assert httpx.get(f"{gw.url}/readyz").status_code == 200


def test_stop_sequence_truncates(stack: tuple[ModelServerProcess, GatewayProcess, dict]) -> None:
    _, gw, keys = stack
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=keys["demo"], max_retries=0)
    full = client.completions.create(model="gen", prompt="The", max_tokens=12, temperature=0)
    text = full.choices[0].text
    if len(text) < 2:
        pytest.skip("the tiny model produced too little text to cut")
    stop = text[len(text) // 2 :][:2]
    cut = client.completions.create(
        model="gen", prompt="The", max_tokens=12, temperature=0, stop=[stop]
    )
    assert cut.choices[0].text == text[: text.find(stop)]
    assert cut.choices[0].finish_reason == "stop"


@contextlib.contextmanager
def _modelserver_on(base: Path, rest: int, grpc: int) -> Iterator[subprocess.Popen[bytes]]:
    """`tokenpulse modelserver` on fixed ports (so a restart comes back at the same address)."""
    cmd = [
        sys.executable, "-m", "stack.cli", "modelserver", f"--port={grpc}",
        f"--rest_api_port={rest}", "--model_name=gen", f"--model_base_path={base}",
    ]  # fmt: skip
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                status = httpx.get(f"http://127.0.0.1:{rest}/v1/models/gen", timeout=1).json()
                if any(v["state"] == "AVAILABLE" for v in status["model_version_status"]):
                    break
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "model server did not start"
            time.sleep(0.2)
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(15)


OPEN_S = 5.0  # long enough that a loaded machine reads the breaker open before it cools down


def _wait_for_half_open(url: str) -> None:
    deadline = time.monotonic() + OPEN_S + 10
    while httpx.get(f"{url}/readyz").json()["circuit_breaker"] != "half_open":
        assert time.monotonic() < deadline, "the breaker never cooled down"
        time.sleep(0.1)


def test_breaker_opens_when_the_model_server_dies_and_closes_when_it_returns(
    tmp_path: Path, tiny_export: Path
) -> None:
    base = tmp_path / "gen"
    install_version(tiny_export, base, 1)
    keys = make_keys_file(tmp_path / "keys.json", demo={})
    rest, grpc = free_port(), free_port()
    body = {"prompt": "Hi", "max_new_tokens": 2}

    def generate(url: str) -> httpx.Response:
        return httpx.post(f"{url}/v1/generate", json=body, headers=auth(keys["demo"]), timeout=30)

    with (
        _modelserver_on(base, rest, grpc) as first,
        running_gateway(
            f"http://127.0.0.1:{rest}",
            tmp_path / "keys.json",
            breaker_failure_threshold=2,
            breaker_open_s=OPEN_S,
        ) as gw,
    ):
        assert generate(gw.url).status_code == 200
        first.kill()  # SIGKILL: no goodbye
        first.wait(10)
        codes = [generate(gw.url).json()["error"]["code"] for _ in range(3)]
        assert codes == ["upstream_unavailable", "upstream_unavailable", "circuit_open"]
        assert metric_value(gw.url, "tokenpulse_gateway_circuit_breaker_state") == 2
        ready = httpx.get(f"{gw.url}/readyz")  # the pod stays in its Service: its own state
        assert ready.status_code == 200 and ready.json()["upstream_ready"] is False
        with _modelserver_on(base, rest, grpc):
            _wait_for_half_open(gw.url)  # past the cool-down: the next request is the probe
            assert generate(gw.url).status_code == 200
            assert metric_value(gw.url, "tokenpulse_gateway_circuit_breaker_state") == 0
            assert httpx.get(f"{gw.url}/readyz").json()["upstream_ready"] is True


def test_a_prompt_over_the_window_in_bytes_that_fits_in_the_models_tokens_is_served(
    stack: tuple[ModelServerProcess, GatewayProcess, dict[str, str]],
) -> None:
    _, gw, keys = stack
    prompt = "the " * 60
    tokens = tiny_tokens(prompt) + 1
    assert len(prompt.encode()) + 1 + 16 > 128 >= tokens + 16  # bytes would refuse it
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=keys["demo"], max_retries=0)
    done = client.completions.create(model="gen", prompt=prompt, max_tokens=16)
    assert done.usage.prompt_tokens == tokens - 1
    # no max_tokens: the rest of the window, in the model's tokens, up to the cap (32); greedy,
    # since a sampled answer may end at its first token (end of turn), which says nothing here
    chat = client.chat.completions.create(
        model="gen", messages=[{"role": "user", "content": prompt}], temperature=0
    )
    assert 0 < chat.usage.completion_tokens <= min(128 - (chat.usage.prompt_tokens + 1), 32)


def test_a_prompt_longer_than_the_window_is_a_400_unless_truncation_is_asked(
    stack: tuple[ModelServerProcess, GatewayProcess, dict[str, str]], tmp_path: Path
) -> None:
    server, gw, keys = stack
    prompt = "x" * 1200
    tokens = tiny_tokens(prompt) + 1  # the model's count and its start token
    assert tokens + 16 > 128
    native = httpx.post(
        f"{gw.url}/v1/generate", json={"prompt": prompt}, headers=auth(keys["demo"])
    )
    assert native.status_code == 400
    assert native.json()["error"]["message"].startswith(
        f"This model's maximum context length is 128 tokens. However, you requested "
        f"{tokens + 16} tokens ({tokens} in the prompt, 16 in the completion)"
    )
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=keys["demo"], max_retries=0)
    with pytest.raises(openai.BadRequestError, match="maximum context length is 128 tokens"):
        client.completions.create(model="gen", prompt=prompt, max_tokens=4)
    cut = httpx.post(
        f"{gw.url}/v1/generate",
        json={"prompt": prompt, "max_new_tokens": 4, "truncate_prompt_tokens": -1},
        headers=auth(keys["demo"]),
    )
    assert cut.status_code == 200
    # the model kept the end that fits its window
    kept = cut.json()["usage"]["prompt_tokens"]
    assert cut.json()["signals"]["truncated_prompt_tokens"] > 0 and 0 < kept < 128
    done = client.completions.create(
        model="gen", prompt=prompt, max_tokens=4, extra_body={"truncate_prompt_tokens": 20}
    )
    assert 0 < done.usage.prompt_tokens <= 20  # the last 20 bytes: 20 tokens at most
    # a gateway told a larger window than the model's still refuses what the model cut
    key = make_keys_file(tmp_path / "keys.json", demo={})["demo"]
    with running_gateway(
        server.rest_url, tmp_path / "keys.json", context_window_tokens=1024
    ) as wrong:
        resp = httpx.post(
            f"{wrong.url}/v1/generate",
            json={"prompt": "abcdefghij " * 60, "max_new_tokens": 4},
            headers=auth(key),
        )
    assert resp.status_code == 400
    assert "the model dropped" in resp.json()["error"]["message"]
