"""Streams' `continue` calls coalesced per version: one in flight, the next carries the rest."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from serving.gateway.chunkbatch import ChunkBatcher
from serving.gateway.upstream import Chunk, UpstreamTimeout, UpstreamUnreachable


class FakeCall:
    """Answers each row with its prompt as the chunk, after `delay_s`; records every call."""

    def __init__(self, delay_s: float = 0.05, fail: Exception | None = None) -> None:
        self.delay_s, self.fail = delay_s, fail
        self.calls: list[list[str]] = []
        self.cancelled = 0

    async def __call__(
        self, model: str, version: int, rows: list[dict[str, Any]], timeout_s: float
    ) -> tuple[list[Chunk], float]:
        self.calls.append([r["prompt"] for r in rows])
        try:
            await asyncio.sleep(self.delay_s)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if self.fail is not None:
            raise self.fail
        return [Chunk(r["prompt"].encode(), "", 0.0, 0, 1, 0) for r in rows], self.delay_s


def _rows(*prompts: str) -> list[dict[str, Any]]:
    return [{"prompt": p} for p in prompts]


def test_streams_waiting_during_a_call_share_the_next_one() -> None:
    fake = FakeCall()
    batcher = ChunkBatcher(fake, max_rows=32)

    async def main() -> list[list[bytes]]:
        first = asyncio.ensure_future(batcher.continue_("gen", 1, _rows("a"), 5))
        await asyncio.sleep(0.01)  # "a" is in flight; these three wait for the next call
        rest = [batcher.continue_("gen", 1, _rows(p), 5) for p in ("b", "c")]
        rest.append(batcher.continue_("gen", 1, _rows("d", "e"), 5))
        done = await asyncio.gather(first, *rest)
        return [[c.tokens for c in chunks] for chunks, _s in done]

    answers = asyncio.run(main())
    assert fake.calls == [["a"], ["b", "c", "d", "e"]]
    assert answers == [[b"a"], [b"b"], [b"c"], [b"d", b"e"]]  # each stream gets its own rows


def test_a_call_carries_at_most_max_rows_and_versions_do_not_mix() -> None:
    fake = FakeCall()
    batcher = ChunkBatcher(fake, max_rows=2)

    async def main() -> None:
        await asyncio.gather(
            *(batcher.continue_("gen", 1, _rows(p), 5) for p in "abc"),
            batcher.continue_("gen", 2, _rows("z"), 5),
        )

    asyncio.run(main())
    assert sorted(fake.calls) == [["a", "b"], ["c"], ["z"]]  # all three came before a call


def test_a_failed_call_fails_every_stream_in_it_with_its_error() -> None:
    batcher = ChunkBatcher(FakeCall(fail=UpstreamUnreachable("down")), max_rows=32)

    async def main() -> list[object]:
        return await asyncio.gather(
            *(batcher.continue_("gen", 1, _rows(p), 5) for p in "ab"), return_exceptions=True
        )

    assert all(isinstance(r, UpstreamUnreachable) for r in asyncio.run(main()))


def test_each_stream_keeps_its_own_deadline() -> None:
    batcher = ChunkBatcher(FakeCall(delay_s=0.3), max_rows=32)

    async def main() -> None:
        await batcher.continue_("gen", 1, _rows("a"), 0.05)

    with pytest.raises(UpstreamTimeout):
        asyncio.run(main())


def test_a_call_every_stream_left_is_cancelled_and_a_leaver_not_sent_is_dropped() -> None:
    fake = FakeCall(delay_s=0.2)
    batcher = ChunkBatcher(fake, max_rows=32)

    async def main() -> None:
        a = asyncio.ensure_future(batcher.continue_("gen", 1, _rows("a"), 5))
        await asyncio.sleep(0.01)
        b = asyncio.ensure_future(batcher.continue_("gen", 1, _rows("b"), 5))
        c = asyncio.ensure_future(batcher.continue_("gen", 1, _rows("c"), 5))
        await asyncio.sleep(0.01)
        a.cancel()  # the only stream of the call in flight hangs up
        b.cancel()  # a waiting one hangs up before its call
        await c
        await asyncio.sleep(0)

    asyncio.run(main())
    assert fake.cancelled == 1 and fake.calls == [["a"], ["c"]]


def test_the_next_call_waits_briefly_for_the_streams_of_the_last_one() -> None:
    fake = FakeCall(delay_s=0.05)
    batcher = ChunkBatcher(fake, max_rows=32)

    async def stream(prompt: str, chunks: int) -> None:
        for _ in range(chunks):
            await batcher.continue_("gen", 1, _rows(prompt), 5)
            await asyncio.sleep(0.002)  # writing to its client before asking again

    async def main() -> None:
        first = [asyncio.ensure_future(stream(p, 2)) for p in "ab"]
        await asyncio.sleep(0.01)
        await asyncio.gather(*first, stream("c", 1))  # c arrives while a and b's call runs

    asyncio.run(main())
    # without the wait, c would go alone and a, b after it: two cohorts from then on
    assert fake.calls == [["a", "b"], ["c", "a", "b"]]
