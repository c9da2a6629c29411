"""Samples: every finished request reaches the sink off the response path; overflow is counted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from devtools.standins.tfserving import TfServingStandin
from serving.gateway.app import Gateway
from serving.gateway.settings import GatewaySettings
from serving.gateway.sink import NullSink, SampleDispatcher, load_sink
from tests.serving.gateway.helpers import auth
from tests.support.memory_sink import MemorySink
from tokenpulse.samples import Feedback, NonBlockingSink, RequestStats, Sample, SampleSink


class BlockedSink:
    """Never finishes handling a sample until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.seen: list[Sample] = []

    async def handle(self, sample: Sample) -> None:
        self.seen.append(sample)
        await self.release.wait()


def test_protocol_and_loader() -> None:
    assert isinstance(MemorySink(), SampleSink) and isinstance(NullSink(), SampleSink)
    assert isinstance(load_sink(""), NullSink)
    assert isinstance(load_sink("tests.support.memory_sink:MemorySink"), MemorySink)
    with pytest.raises(ValueError, match="module:factory"):
        load_sink("serving.gateway.sink")
    with pytest.raises(ValueError, match="SampleSink"):
        load_sink("builtins:dict")


def test_dispatcher_drops_and_counts_when_full() -> None:
    async def scenario() -> None:
        sink = BlockedSink()
        drops: list[int] = []
        disp = SampleDispatcher(sink, maxsize=2, on_drop=lambda: drops.append(1))
        disp.start()
        disp.offer(Sample(stats=RequestStats(request_id="0", route="generate")))
        await asyncio.sleep(0.01)  # the drain task takes it and blocks in the sink
        for i in range(1, 5):
            disp.offer(Sample(stats=RequestStats(request_id=str(i), route="generate")))
        # one is being handled, two wait in the queue, the other two were dropped
        assert len(sink.seen) == 1 and disp.dropped == 2 and len(drops) == 2
        sink.release.set()
        await disp.stop()
        assert [s.stats.request_id for s in sink.seen] == ["0", "1", "2"]

    asyncio.run(scenario())


class OfferSink:
    """A non-blocking sink: takes what it is offered at once, refuses past `room`."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.taken: list[object] = []

    async def handle(self, sample: Sample) -> None:
        raise AssertionError("a non-blocking sink is offered samples, never handed them")

    def offer(self, sample: Sample) -> bool:
        if len(self.taken) >= self.room:
            return False
        self.taken.append(sample)
        return True

    def offer_feedback(self, feedback: Feedback) -> bool:
        return self.offer(feedback)  # type: ignore[arg-type]


def test_a_non_blocking_sink_is_offered_samples_directly_and_counts_its_own_drops() -> None:
    sink = OfferSink(room=2)
    assert isinstance(sink, NonBlockingSink)
    drops: list[int] = []
    disp = SampleDispatcher(sink, maxsize=1, on_drop=lambda: drops.append(1))
    # no loop, no drain task: the sink has it the moment it is offered
    disp.offer(Sample(stats=RequestStats(request_id="a", route="generate")))
    disp.offer(Feedback("a", "cmpl-a", "k", 1.0, "thumbs"))
    disp.offer(Sample(stats=RequestStats(request_id="b", route="generate")))
    assert [getattr(t, "request_id", None) or t.stats.request_id for t in sink.taken] == ["a", "a"]
    assert disp.dropped == 0 and drops == []  # refused by the sink, counted by the sink


def test_with_no_sink_nothing_is_built_queued_or_drained(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str], monkeypatch
) -> None:
    built: list[object] = []
    monkeypatch.setattr("serving.gateway.outcome.Sample", lambda **kw: built.append(kw))
    settings = GatewaySettings(keys_file=keys_file, upstream_url=standin.url, access_log=False)

    async def scenario() -> None:
        gateway = Gateway(settings)  # no sample sink configured
        assert isinstance(gateway.samples.sink, NullSink) and gateway.samples.discards
        async with TestServer(gateway.app(), host="127.0.0.1") as server:
            async with aiohttp.ClientSession() as session:
                url = str(server.make_url("/v1/generate"))
                body = {"prompt": "p", "max_new_tokens": 3}
                async with session.post(url, json=body, headers=auth(keys["demo"])) as resp:
                    assert resp.status == 200
            assert gateway.samples._task is None and gateway.samples._queue.empty()
        assert built == []  # the per-request sample is not even built

    asyncio.run(scenario())


def test_every_request_is_sampled_without_waiting_for_the_sink(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    settings = GatewaySettings(keys_file=keys_file, upstream_url=standin.url, access_log=False)

    async def scenario() -> None:
        sink = BlockedSink()
        gateway = Gateway(settings, sink=sink)
        async with TestServer(gateway.app(), host="127.0.0.1") as server:
            async with aiohttp.ClientSession() as session:
                url = str(server.make_url("/v1/generate"))
                body = {"prompt": "secret prompt", "max_new_tokens": 3}
                async with session.post(url, json=body, headers=auth(keys["demo"])) as resp:
                    assert resp.status == 200  # answered although the sink is stuck
                async with session.post(url, json={"prompt": 1}, headers=auth(keys["demo"])) as r:
                    assert r.status == 422
                async with session.post(url, json=body) as resp:
                    assert resp.status == 401
            await asyncio.sleep(0.05)
            sink.release.set()
            await asyncio.sleep(0.05)
        first, invalid, unauth = sink.seen
        assert first.prompts == ("secret prompt",) and first.outputs == ("hello world (v1)",)
        assert first.stats.version == "1" and first.stats.key_id == "demo"
        assert first.stats.outputs[0].output_tokens == 3 and first.params["max_new_tokens"] == 3
        assert (invalid.stats.status, invalid.prompts) == (422, ())
        assert (unauth.stats.status, unauth.stats.key_id) == (401, "")

    asyncio.run(scenario())
