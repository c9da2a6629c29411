"""Shutting down without cutting requests off: on SIGTERM the gateway drains.

While draining, every new request is refused with a typed 503 (`shutting_down`, with
`Connection: close`), `/readyz` says `draining`, and the requests in flight, streams included,
run to their end, for at most `drain_timeout_s`. At that bound a request still running is ended:
a stream with the typed error event and `data: [DONE]`, a unary request with the 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Iterator
from typing import TypeVar

from serving.gateway.errors import ShuttingDown
from tokenpulse.logging import get_logger

log = get_logger(__name__)
T = TypeVar("T")
# after the bound: how long the ended requests get to write their last bytes
LAST_WORDS_S = 2.0


class Drain:
    """The requests in flight, and whether (and until when) the gateway is draining."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.draining = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._expired = asyncio.Event()

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        """Count one request in flight for the block; refused with ShuttingDown while draining."""
        if self.draining:
            raise ShuttingDown("the gateway is shutting down: retry on another replica")
        self.in_flight += 1
        self._idle.clear()
        try:
            yield
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self._idle.set()

    async def until(self, call: Awaitable[T]) -> T:
        """Await `call` unless the drain bound passes first: then cancel it, raise ShuttingDown."""
        if not self.draining:
            return await call  # the common case costs no task (a chunk is short)
        if self._expired.is_set():
            if asyncio.iscoroutine(call):
                call.close()
            raise ShuttingDown("the gateway shut down before this request finished")
        task = asyncio.ensure_future(call)
        bound = asyncio.ensure_future(self._expired.wait())
        try:
            await asyncio.wait({task, bound}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            bound.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if task.cancelled():
            raise ShuttingDown("the gateway shut down before this request finished")
        return task.result()

    def cut(self) -> None:
        """Stop waiting (a second SIGTERM): end the requests still running now."""
        self._expired.set()

    async def drain(self, timeout_s: float) -> bool:
        """Refuse new requests and wait for those in flight, at most `timeout_s` (or until
        `cut()`); then end the rest. True when everything finished in time."""
        self.draining = True
        started = time.monotonic()
        log.info("gateway draining", in_flight=self.in_flight, drain_timeout_s=timeout_s)
        idle = asyncio.ensure_future(self._idle.wait())
        cut = asyncio.ensure_future(self._expired.wait())
        await asyncio.wait({idle, cut}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        idle.cancel()
        cut.cancel()
        if self._idle.is_set():
            log.info("gateway drained", seconds=round(time.monotonic() - started, 3))
            return True
        log.warning("drain bound reached; ending the requests still running",
                    in_flight=self.in_flight, drain_timeout_s=timeout_s)  # fmt: skip
        self._expired.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), LAST_WORDS_S)
        return False
