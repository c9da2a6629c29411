"""Streams' `continue` calls coalesced: one call per version at a time, carrying every stream's row.

Each stream asks for its next chunk when the previous one is sent. Called one by one, the chunk
calls of many streams reach the model server spread out, its batcher merges whichever arrive
while a batch runs, and under closed-loop load two cohorts alternate (half the streams per batch).
Here the gateway keeps one `continue` call in flight per model version (per replica that serves
it) and sends, in the next one, every row that became ready meanwhile: all the streams that were
in the last call, plus new ones, up to `max_rows` (the model server's max_batch_size): the next
call waits (at most REGROUP_S) until as many requests came as its predecessor carried.
That is continuous batching at chunk boundaries, done where all the streams are visible.

A row's caller waits with its own deadline and may leave (a client that hangs up): a row not yet
sent is dropped from the next call; one already sent finishes with the others, its answer unread.
A failed call fails every row in it, with the same typed error one call of its own would raise.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from serving.gateway.upstream import Chunk, UpstreamTimeout

# After a call, how long the next one may wait for as many requests as that call carried: the
# streams it did not finish ask again within a few loop iterations, and under closed-loop load a
# finished stream's client sends its next request a round trip later. A call sent before they
# ask carries only the newcomers, and the cohorts alternate again. Waiting costs nothing when
# nothing else waits: an idle lane sends a new request at once.
REGROUP_S = 0.01

# (model, version, rows, timeout_s) -> (one chunk per row, upstream seconds)
ContinueCall = Callable[
    [str, int, list[dict[str, Any]], float], Awaitable[tuple[list[Chunk], float]]
]


@dataclass
class _Waiting:
    rows: list[dict[str, Any]]
    future: asyncio.Future[tuple[list[Chunk], float]]
    deadline: float  # perf_counter() seconds


class _Lane:
    """The queue and the calls in flight of one (model, version)."""

    def __init__(self) -> None:
        self.waiting: list[_Waiting] = []
        self.running = 0
        self.asked = 0  # requests so far (the next call waits for those its predecessor freed)
        self.arrived = asyncio.Event()  # set whenever a stream asks

    async def regroup(self, since: int, expected: int) -> None:
        """Wait until `expected` more requests came after the `since`-th, at most REGROUP_S."""
        end = time.perf_counter() + REGROUP_S
        while self.asked - since < expected and (left := end - time.perf_counter()) > 0:
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), left)
            except TimeoutError:
                return


class ChunkBatcher:
    """`continue` for streams, coalesced per version (see the module docstring)."""

    def __init__(self, call: ContinueCall, max_rows: int, parallel: int = 1) -> None:
        self._call = call
        self.max_rows = max_rows
        self.parallel = parallel  # calls in flight per version: one per replica
        self._lanes: dict[tuple[str, int], _Lane] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def continue_(
        self, model: str, version: int, rows: list[dict[str, Any]], timeout_s: float
    ) -> tuple[list[Chunk], float]:
        """The next chunk of each of `rows` (one stream's), in a call shared with other streams."""
        lane = self._lanes.setdefault((model, version), _Lane())
        future: asyncio.Future[tuple[list[Chunk], float]] = (
            asyncio.get_running_loop().create_future()
        )
        lane.waiting.append(_Waiting(rows, future, time.perf_counter() + timeout_s))
        lane.asked += 1
        lane.arrived.set()
        self._kick(model, version, lane)
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError as exc:
            raise UpstreamTimeout(f"no answer within {timeout_s:.3g}s") from exc

    def _kick(self, model: str, version: int, lane: _Lane) -> None:
        if lane.running < self.parallel and any(not w.future.done() for w in lane.waiting):
            lane.running += 1
            task = asyncio.get_running_loop().create_task(self._drain(model, version, lane))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _take(self, lane: _Lane) -> list[_Waiting]:
        """The next call's streams: those still waiting, in arrival order, up to max_rows rows."""
        lane.waiting = [w for w in lane.waiting if not w.future.done()]
        batch: list[_Waiting] = []
        rows = 0
        while lane.waiting and (not batch or rows + len(lane.waiting[0].rows) <= self.max_rows):
            w = lane.waiting.pop(0)
            batch.append(w)
            rows += len(w.rows)
        return batch

    async def _drain(self, model: str, version: int, lane: _Lane) -> None:
        try:
            while batch := self._take(lane):
                since = lane.asked
                await self._run(model, version, batch)
                if lane.waiting:  # someone to send: first let the last call's streams rejoin
                    await lane.regroup(since, len(batch))
        finally:
            lane.running -= 1
            if lane.waiting:  # arrived as this drain was finishing
                self._kick(model, version, lane)

    async def _run(self, model: str, version: int, batch: list[_Waiting]) -> None:
        """One call for `batch`, each stream answered with its own rows' chunks."""
        rows = [row for w in batch for row in w.rows]
        timeout_s = max(w.deadline for w in batch) - time.perf_counter()
        call = asyncio.ensure_future(self._call(model, version, rows, max(timeout_s, 0.001)))

        def abandoned(_: object) -> None:
            # every stream in it left (hung up, or its deadline passed): nobody reads the answer
            if all(w.future.done() for w in batch) and not call.done():
                call.cancel()

        for w in batch:
            w.future.add_done_callback(abandoned)
        try:
            chunks, seconds = await call
        except asyncio.CancelledError:
            if call.cancelled() and not _current_cancelling():
                return  # abandoned by every stream: the drain goes on
            raise
        except Exception as exc:  # noqa: BLE001 - upstream errors (and bugs) fail its streams
            for w in batch:
                if not w.future.done():
                    w.future.set_exception(exc)
            return
        start = 0
        for w in batch:
            if not w.future.done():
                w.future.set_result((chunks[start : start + len(w.rows)], seconds))
            start += len(w.rows)

    async def close(self) -> None:
        """Cancel the calls in flight (shutting down)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _current_cancelling() -> bool:
    """Whether the running task itself is being cancelled (shutting down), not just its call."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
