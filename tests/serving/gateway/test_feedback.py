"""POST /v1/feedback: by the id the client saw, the key's own responses only, 400s that name the
field, counted per model and version, handed to the sink with the response's identity."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from devtools.standins.tfserving import TfServingStandin
from serving.gateway.app import Gateway
from serving.gateway.feedback import RecentResponses
from serving.gateway.openapi import build_openapi
from serving.gateway.settings import GatewaySettings
from tests.serving.gateway.helpers import auth
from tokenpulse.samples import Feedback, FeedbackSink, Sample


class FeedbackMemory:
    """A sink keeping samples and feedback."""

    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.feedback_seen: list[Feedback] = []

    async def handle(self, sample: Sample) -> None:
        self.samples.append(sample)

    async def feedback(self, feedback: Feedback) -> None:
        self.feedback_seen.append(feedback)


BAD = [
    (b"{", "malformed json", None),
    (b"[]", "body", None),
    (b'{"score": 1}', "response_id", "response_id"),
    (b'{"response_id": "abc", "score": 1}', "response_id", "response_id"),
    (b'{"response_id": "cmpl-x"}', "score", "score"),
    (b'{"response_id": "cmpl-x", "score": "1"}', "score", "score"),
    (b'{"response_id": "cmpl-x", "score": true}', "score", "score"),
    (b'{"response_id": "cmpl-x", "score": 2}', "score", "score"),
    (b'{"response_id": "cmpl-x", "score": 0.5}', "thumbs", "score"),
    (b'{"response_id": "cmpl-x", "score": -0.5, "scale": "unit"}', "unit", "score"),
    (b'{"response_id": "cmpl-x", "score": 1, "scale": "stars"}', "scale", "scale"),
    (b'{"response_id": "cmpl-x", "score": 1, "comment": 5}', "comment", "comment"),
    (b'{"response_id": "cmpl-x", "score": 1, "comment": "' + b"x" * 51 + b'"}', "at most 50",
     "comment"),
    (b'{"response_id": "cmpl-x", "score": 1, "extra": 1}', "extra", "extra"),
]  # fmt: skip


def _run(
    standin: TfServingStandin, keys_file: Path, scenario: Any, **overrides: Any
) -> tuple[FeedbackMemory, Gateway]:
    settings = GatewaySettings(
        keys_file=keys_file, upstream_url=standin.url, access_log=False,
        feedback_max_comment_chars=50, **overrides,
    )  # fmt: skip
    sink = FeedbackMemory()
    gateway = Gateway(settings, sink=sink)

    async def main() -> None:
        async with TestServer(gateway.app(), host="127.0.0.1") as server:
            async with aiohttp.ClientSession() as session:
                await scenario(session, lambda path: str(server.make_url(path)))
            await asyncio.sleep(0.05)  # the dispatcher hands what is queued to the sink

    asyncio.run(main())
    return sink, gateway


def _metric(gateway: Gateway, **labels: str) -> float:
    value = gateway.metrics.registry.get_sample_value("tokenpulse_gateway_feedback_total", labels)
    return value or 0.0


def test_feedback_on_own_response_is_counted_and_handed_to_the_sink(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    seen: dict[str, Any] = {}

    async def scenario(session: aiohttp.ClientSession, url: Any) -> None:
        body = {"model": "gen", "prompt": "hello", "max_tokens": 3}
        async with session.post(url("/v1/completions"), json=body,
                                headers=auth(keys["demo"])) as resp:  # fmt: skip
            seen["completion"] = await resp.json()
        async with session.post(url("/v1/generate"), json={"prompt": "hi", "max_new_tokens": 2},
                                headers=auth(keys["demo"])) as resp:  # fmt: skip
            seen["generate"] = await resp.json()
        fb = {"response_id": seen["completion"]["id"], "score": -1,
              "comment": "wrong, mail me at jane.doe@example.com"}  # fmt: skip
        async with session.post(url("/v1/feedback"), json=fb, headers=auth(keys["demo"])) as r:
            seen["status"], seen["answer"] = r.status, await r.json()
        unit = {"response_id": seen["generate"]["id"], "score": 0.9, "scale": "unit"}
        async with session.post(url("/v1/feedback"), json=unit, headers=auth(keys["demo"])) as r:
            seen["unit"] = (r.status, await r.json())
        # another key may not score it: the same 404 whatever the id
        async with session.post(url("/v1/feedback"), json=fb, headers=auth(keys["other"])) as r:
            seen["other"] = (r.status, await r.json())
        async with session.post(url("/v1/feedback"), json=fb) as r:
            seen["anonymous"] = r.status
        late = {"response_id": "gen-from-last-week", "score": 0}
        async with session.post(url("/v1/feedback"), json=late, headers=auth(keys["demo"])) as r:
            seen["late"] = (r.status, await r.json())

    sink, gateway = _run(standin, keys_file, scenario)
    completion_id = seen["completion"]["id"]
    assert seen["status"] == 202
    assert seen["answer"] == {"response_id": completion_id, "score_class": "negative",
                              "matched": True}  # fmt: skip
    assert seen["unit"] == (202, {"response_id": seen["generate"]["id"],
                                  "score_class": "positive", "matched": True})  # fmt: skip
    status, body = seen["other"]
    assert status == 404 and body["error"]["param"] == "response_id"
    assert seen["anonymous"] == 401
    assert seen["late"][0] == 202 and seen["late"][1]["matched"] is False
    first, unit, late = sink.feedback_seen
    sample = sink.samples[0]
    assert first.request_id == sample.stats.request_id == completion_id.removeprefix("cmpl-")
    assert (first.key_id, first.model, first.score_class) == ("demo", "gen", "negative")
    assert first.version == sample.stats.version and first.version
    assert "jane.doe@example.com" in first.comment  # the pipeline redacts, not the gateway
    assert unit.value == pytest.approx(0.8) and unit.scale == "unit"
    assert late.model == "" and late.score_class == "neutral"
    version = sample.stats.version
    assert _metric(gateway, model="gen", version=version, score_class="negative") == 1
    assert _metric(gateway, model="gen", version=version, score_class="positive") == 1
    assert _metric(gateway, model="__unknown__", version="", score_class="neutral") == 1
    # every class exists from the version's first output, so a rate sees the first feedback
    assert gateway.metrics.registry.get_sample_value(
        "tokenpulse_gateway_feedback_total", {"model": "gen", "version": version,
                                              "score_class": "neutral"}) == 0.0  # fmt: skip


@pytest.mark.parametrize(("body", "words", "param"), BAD)
def test_bad_feedback_is_a_400_naming_the_field(
    standin: TfServingStandin,
    keys_file: Path,
    keys: dict[str, str],
    body: bytes,
    words: str,
    param: str | None,
) -> None:
    seen: dict[str, Any] = {}

    async def scenario(session: aiohttp.ClientSession, url: Any) -> None:
        headers = {**auth(keys["demo"]), "Content-Type": "application/json"}
        async with session.post(url("/v1/feedback"), data=body, headers=headers) as resp:
            seen["status"], seen["body"] = resp.status, await resp.json()

    sink, _ = _run(standin, keys_file, scenario)
    assert seen["status"] == 400, seen["body"]
    err = seen["body"]["error"]
    assert err["status"] == 400 and words in err["message"]
    assert err.get("param") == param
    assert "Traceback" not in json.dumps(seen["body"])
    assert sink.feedback_seen == []


def test_recent_responses_are_bounded_in_time_and_count() -> None:
    now = [0.0]
    recent = RecentResponses(window_s=10, max_entries=2, clock=lambda: now[0])
    recent.remember("a", "gen", "1", "", "k")
    recent.remember("b", "gen", "1", "", "k")
    recent.remember("c", "gen", "1", "", "k")
    assert recent.get("a") is None and len(recent) == 2  # the oldest goes first
    now[0] = 10.0
    assert recent.get("b") is None  # past its window
    recent.remember("d", "gen", "2", "", "k")
    assert len(recent) == 1 and recent.get("d") is not None
    RecentResponses(0, 10).remember("x", "gen", "1", "", "k")  # window 0: remembers nothing


def test_openapi_documents_feedback_from_the_same_models(keys_file: Path) -> None:
    keys_file.write_text('{"keys": []}')
    doc = build_openapi(GatewaySettings(keys_file=keys_file, feedback_max_comment_chars=99))
    op = doc["paths"]["/v1/feedback"]["post"]
    assert op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/FeedbackRequest"
    )
    assert set(op["responses"]) == {"202", "400", "401", "404", "413"}
    schemas = doc["components"]["schemas"]
    assert schemas["FeedbackRequest"]["properties"]["comment"]["anyOf"][0]["maxLength"] == 99
    assert schemas["FeedbackResponse"]["required"] == ["response_id", "score_class", "matched"]


def test_the_pipeline_sink_is_a_feedback_sink() -> None:
    from log_pipeline.sink import SpoolSink

    assert issubclass(SpoolSink, FeedbackSink) or hasattr(SpoolSink, "feedback")
    assert isinstance(FeedbackMemory(), FeedbackSink)


def test_feedback_spends_the_keys_request_budget(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    # each feedback can store a record: a key must not write to the sample store without limit
    seen: list[tuple[int, str | None]] = []

    async def scenario(session: aiohttp.ClientSession, url: Any) -> None:
        for i in range(4):
            fb = {"response_id": f"gen-{i:024x}", "score": -1}
            async with session.post(url("/v1/feedback"), json=fb, headers=auth(keys["demo"])) as r:
                seen.append((r.status, r.headers.get("Retry-After")))

    sink, _ = _run(standin, keys_file, scenario, default_requests_per_minute=2)
    assert [s for s, _ in seen] == [202, 202, 429, 429]
    assert all(int(after) >= 1 for s, after in seen if s == 429 and after is not None)
    assert seen[2][1] is not None
    assert len(sink.feedback_seen) == 2


def test_feedback_takes_a_chat_completions_id(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    seen: dict[str, Any] = {}

    async def scenario(session: aiohttp.ClientSession, url: Any) -> None:
        body = {"model": "gen", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
        async with session.post(url("/v1/chat/completions"), json=body,
                                headers=auth(keys["demo"])) as resp:  # fmt: skip
            seen["chat"] = await resp.json()
        fb = {"response_id": seen["chat"]["id"], "score": 1}
        async with session.post(url("/v1/feedback"), json=fb, headers=auth(keys["demo"])) as r:
            seen["answer"] = (r.status, await r.json())

    sink, _ = _run(standin, keys_file, scenario)
    chat_id = seen["chat"]["id"]
    assert chat_id.startswith("chatcmpl-")
    assert seen["answer"] == (202, {"response_id": chat_id, "score_class": "positive",
                                    "matched": True})  # fmt: skip
    (fb,) = sink.feedback_seen
    assert fb.request_id == chat_id.removeprefix("chatcmpl-") and fb.model == "gen"
