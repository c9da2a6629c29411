"""Streaming end to end: the `openai` SDK, a real gateway, the project's model server running the
tiny model's real `continue` signature (REST, as TF Serving speaks it)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.serving.gateway.helpers import auth, metric_value
from tests.support.gateway import GatewayProcess, TinyGen, make_keys_file, running_gateway
from tests.support.modelserver import ModelServerProcess

pytestmark = pytest.mark.slow
CHUNK = 4


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, tiny_gen: TinyGen
) -> Iterator[tuple[ModelServerProcess, GatewayProcess, openai.OpenAI, str]]:
    """The shared model server (versions 1 and 2, labels stable/canary) and a gateway streaming
    in chunks of 4."""
    tmp = tmp_path_factory.mktemp("stream-e2e")
    key = make_keys_file(tmp / "keys.json", demo={})["demo"]
    with running_gateway(
        tiny_gen.server.rest_url, tmp / "keys.json", model_config_file=str(tiny_gen.config),
        max_new_tokens_limit=48, context_window_tokens=64,
        stream_chunk_tokens=CHUNK, stream_first_chunk_tokens=CHUNK,
    ) as gw:  # fmt: skip
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0)
        yield tiny_gen.server, gw, client, key


def _streamed(client: openai.OpenAI, **kw: object) -> tuple[list[str], str | None]:
    pieces, finish = [], None
    for chunk in client.completions.create(model="gen", stream=True, **kw):  # type: ignore[call-overload]
        if chunk.choices:
            pieces.append(chunk.choices[0].text)
            finish = chunk.choices[0].finish_reason or finish
    return pieces, finish


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_streamed_text_equals_unary_for_a_seed(stack, temperature: float) -> None:
    _, _, client, _ = stack
    kw = {"prompt": "Once upon a time", "max_tokens": 24, "temperature": temperature, "seed": 7}
    unary = client.completions.create(model="gen", **kw)  # type: ignore[call-overload]
    pieces, finish = _streamed(client, **kw)
    assert "".join(pieces) == unary.choices[0].text
    assert finish == unary.choices[0].finish_reason
    assert len(pieces) > 1  # it did arrive in chunks


def test_a_stop_sequence_across_a_chunk_boundary(stack) -> None:
    _, _, client, _ = stack
    kw: dict = {"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.9}
    # a sampled output whose bytes 2..5 (across the first chunk boundary, after byte 4) occur
    # first at 2: cut there, the stream must stop after byte 2 without sending bytes 2..3
    for seed in range(1, 40):
        raw = client.completions.create(model="gen", seed=seed, **kw).choices[0].text.encode()
        stop = raw[2:6]
        if len(raw) >= 8 and stop.isascii() and raw.find(stop) == 2:
            break
    else:
        pytest.fail("no seed gave an output to cut")
    pieces, finish = _streamed(client, seed=seed, stop=[stop.decode()], **kw)
    assert "".join(pieces) == raw[:2].decode() and finish == "stop"
    unary = client.completions.create(model="gen", seed=seed, stop=[stop.decode()], **kw)
    assert unary.choices[0].text == "".join(pieces)


def test_chat_streamed_and_unary_and_models_list(stack) -> None:
    _, _, client, _ = stack
    messages = [{"role": "user", "content": "Tell me a story"}]
    unary = client.chat.completions.create(
        model="gen", messages=messages, max_tokens=12, temperature=0, seed=1
    )
    chunks = list(
        client.chat.completions.create(
            model="gen",
            messages=messages,
            max_tokens=12,
            temperature=0,
            seed=1,
            stream=True,
            stream_options={"include_usage": True},
        )  # fmt: skip
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == unary.choices[0].message.content
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == unary.usage.completion_tokens
    (model,) = list(client.models.list())
    assert model.id == "gen"
    extra = model.model_extra or {}
    assert extra["max_model_len"] == 64
    assert extra["tokenpulse"] == {
        "versions": ["2", "1"], "labels": {"stable": "1", "canary": "2"}, "streams": True,
        "stop_in_graph": True,
    }  # fmt: skip


def test_a_disconnect_stops_asking_the_model_server(stack) -> None:
    _, gw, _, key = stack
    calls = "tokenpulse_gateway_upstream_requests_total"
    before = metric_value(gw.url, "tokenpulse_gateway_client_disconnects_total")
    body = {"prompt": "Once", "max_new_tokens": 48, "stream": True, "temperature": 0.0}
    with httpx.stream("POST", f"{gw.url}/v1/generate", headers=auth(key), json=body) as resp:
        assert resp.status_code == 200
        next(resp.iter_raw())
    time.sleep(0.5)
    settled = metric_value(gw.url, calls)
    time.sleep(1.0)
    assert metric_value(gw.url, calls) == settled  # no chunk asked for after the hang-up
    assert metric_value(gw.url, "tokenpulse_gateway_client_disconnects_total") == before + 1
