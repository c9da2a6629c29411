"""Bounded concurrency with a bounded queue and a bounded wait: beyond it, shed fast."""

from __future__ import annotations

import asyncio
from collections import deque


class Shed(Exception):
    """No slot: the queue is full or the wait ran out."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Admission:
    """At most `limit` holders; at most `max_queue` waiters, each waiting at most `max_wait_s`."""

    def __init__(self, limit: int, max_queue: int, max_wait_s: float) -> None:
        self.limit = limit
        self.max_queue = max_queue
        self.max_wait_s = max_wait_s
        self.in_use = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def queued(self) -> int:
        """Requests waiting for a slot now."""
        return len(self._waiters)

    async def acquire(self, timeout_s: float | None = None) -> None:
        """Take a slot, waiting at most min(max_wait_s, timeout_s); raise Shed otherwise."""
        if self.in_use < self.limit and not self._waiters:
            self.in_use += 1
            return
        if len(self._waiters) >= self.max_queue:
            raise Shed("queue full")
        wait = self.max_wait_s if timeout_s is None else min(self.max_wait_s, timeout_s)
        if wait <= 0:
            raise Shed("queue wait exhausted")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), wait)
        except TimeoutError as exc:
            if fut.done() and not fut.cancelled():
                return  # granted at the last moment: keep the slot
            fut.cancel()
            raise Shed("queue wait exhausted") from exc
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # granted, but the caller went away
            else:
                fut.cancel()
            raise
        finally:
            if fut in self._waiters:
                self._waiters.remove(fut)

    def release(self) -> None:
        """Hand the slot to the oldest live waiter, or free it."""
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)  # the slot passes on; in_use is unchanged
                return
        self.in_use -= 1
