"""The streaming route reads server-sent events as they arrive: TTFT, ITL, usage, and how a
stream that fails or stops early is labelled (a fake SSE server over loopback)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest
from aiohttp import web

from devtools.standins.background import BackgroundServer
from stack.loadtest import stats
from stack.loadtest.client import Client, NativeStreamRoute, Outcome, Route, make_route
from stack.loadtest.workload import Item

GAP_S = 0.05
CHUNKS = ("Hel", "lo", " world")


def _event(doc: object) -> bytes:
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


async def _stream(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    kind = body["prompt"]  # the test names the behaviour in the prompt
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await asyncio.sleep(GAP_S)  # the prefill: nothing before the first chunk
    for i, text in enumerate(CHUNKS):
        if i:
            await asyncio.sleep(GAP_S)
        await resp.write(_event({"object": "text_completion", "choices": [{"text": text}]}))
        if kind == "error" and i == 1:
            error = {"message": "upstream failed", "type": "server_error", "code": "upstream"}
            await resp.write(_event({"error": error}))
            return resp
        if kind == "cut" and i == 1:
            return resp  # the server goes away without [DONE]
    usage = {"prompt_tokens": 4, "completion_tokens": 11, "total_tokens": 15}
    await resp.write(_event({"object": "text_completion", "choices": [], "usage": usage}))
    await resp.write(b"data: [DONE]\n\n")
    return resp


async def _native_stream(request: web.Request) -> web.StreamResponse:
    """`/v1/generate` streamed: the gateway's own chunks, text then the usage in the last."""
    body = await request.json()
    assert body["stream"] is True and (body["seed"], body["temperature"]) == (7, 0.5)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await asyncio.sleep(GAP_S)
    for text in CHUNKS:
        await resp.write(_event({"id": "gen-1", "text": text, "finish_reason": None}))
        await asyncio.sleep(GAP_S)
    usage = {"prompt_tokens": 4, "output_tokens": 9, "total_tokens": 13}
    await resp.write(_event({"id": "gen-1", "text": "", "finish_reason": "length", "usage": usage}))
    await resp.write(b"data: [DONE]\n\n")
    return resp


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    def app() -> web.Application:
        a = web.Application()
        a.router.add_post("/v1/completions", _stream)
        a.router.add_post("/v1/generate", _native_stream)
        return a

    with BackgroundServer(app, name="sse-server") as bg:
        yield bg.url


def _send(url: str, kind: str, route: Route | None = None, item: Item | None = None) -> Outcome:
    route = route or make_route("openai", "stream", "gen", None)

    async def go() -> Outcome:
        async with Client(url, route, keys=[], timeout_s=10) as client:
            return await client.send(item or Item(kind, 8), intended=time.monotonic())

    return asyncio.run(go())


def _assert_no_chunk_before_it_was_written(out: Outcome) -> None:
    """Lower bounds only. The server writes text chunk k at k gaps; a busy client may read
    several at once, so each gap it measures can be shorter, but its first and last text
    chunk cannot arrive before they were written."""
    assert out.ttft_s is not None and out.itl_s is not None and out.itl_s >= 0
    assert out.ttft_s >= GAP_S * 0.9
    last_text_s = out.ttft_s + out.itl_s * (len(CHUNKS) - 1)
    assert last_text_s >= GAP_S * len(CHUNKS) * 0.9


def test_a_native_stream_gives_ttft_itl_and_usage(url: str) -> None:
    item = Item("hi", 8, seed=7, temperature=0.5)
    out = _send(url, "ok", NativeStreamRoute("gen"), item)
    assert out.ok and (out.prompt_tokens, out.output_tokens) == (4, 9)
    assert out.ttft_s is not None and out.itl_s is not None
    _assert_no_chunk_before_it_was_written(out)


def test_a_stream_gives_ttft_itl_and_usage(url: str) -> None:
    out = _send(url, "ok")
    assert out.ok, out.label
    assert (out.prompt_tokens, out.output_tokens) == (4, 11)
    assert out.ttft_s is not None and out.itl_s is not None
    _assert_no_chunk_before_it_was_written(out)
    assert out.ttft_s < out.latency_s + 1e-9


def test_an_error_event_and_a_cut_stream_are_not_ok(url: str) -> None:
    error, cut = _send(url, "error"), _send(url, "cut")
    assert error.label == "200 stream upstream" and not error.ok and not error.shed
    assert cut.label == "200 stream unfinished" and not cut.ok


def test_unary_routes_keep_ttft_as_not_applicable() -> None:
    assert make_route("openai", "unary", "gen", None).streaming is False
    out = Outcome(0.0, 0.0, 0.1, 200, "ok", ttft_s=None)
    figures = stats.summarize([out], 1.0, stats.Slo(2.5, 0.99, 0.005, "test"))
    assert figures["ttft_s"] == stats.NA
    streamed = Outcome(0.0, 0.0, 0.2, 200, "ok", ttft_s=0.05, itl_s=0.01)
    figures = stats.summarize([streamed], 1.0, stats.Slo(2.5, 0.99, 0.005, "test"))
    assert figures["ttft_s"]["p50"] == pytest.approx(0.05)
    assert figures["itl_s"]["mean"] == pytest.approx(0.01)
