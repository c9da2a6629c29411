"""Hand every finished request to a sample sink without blocking the response.

The log pipeline implements `SampleSink` (and `FeedbackSink`); the gateway only queues samples
and feedback (bounded, drops are counted) and a background task feeds the sink.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from tokenpulse.logging import get_logger
from tokenpulse.samples import Feedback, FeedbackSink, NonBlockingSink, Sample, SampleSink

log = get_logger(__name__)


class NullSink:
    """Discards samples."""

    async def handle(self, sample: Sample) -> None:
        """Drop it."""

    async def feedback(self, feedback: Feedback) -> None:
        """Drop it."""


def load_sink(spec: str, registry: Any = None) -> SampleSink:
    """Build a sink from "module:factory" (empty = NullSink); a factory taking `registry` gets
    the gateway's metrics registry, so the sink's metrics appear on the gateway's /metrics."""
    if not spec:
        return NullSink()
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise ValueError(f"sample sink {spec!r} must look like module:factory")
    factory = getattr(importlib.import_module(module_name), attr)
    try:
        takes_registry = "registry" in inspect.signature(factory).parameters
    except (TypeError, ValueError):  # builtins and C types have no inspectable signature
        takes_registry = False
    sink = factory(registry=registry) if takes_registry and registry is not None else factory()
    if not isinstance(sink, SampleSink):
        raise ValueError(f"sample sink {spec!r} did not return a SampleSink")
    return sink


class SampleDispatcher:
    """A bounded queue in front of a sink, drained by one background task; a `NonBlockingSink`
    (the log pipeline's) is called directly and counts its own drops."""

    def __init__(
        self, sink: SampleSink, maxsize: int, on_drop: Callable[[], None] | None = None
    ) -> None:
        self.sink = sink
        self._queue: asyncio.Queue[Sample | Feedback] = asyncio.Queue(maxsize)
        self._on_drop = on_drop
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        self._direct = sink if isinstance(sink, NonBlockingSink) else None
        # no sink configured: nothing to build, queue or wake a task for, per request
        self.discards = type(sink) is NullSink

    @property
    def takes_feedback(self) -> bool:
        """Whether the sink stores feedback."""
        return isinstance(self.sink, FeedbackSink)

    def offer(self, sample: Sample | Feedback) -> None:
        """Queue a sample or feedback, or drop (and count) it when the queue is full; never
        waits."""
        if self.discards:
            return
        if self._direct is not None:
            if isinstance(sample, Feedback):
                self._direct.offer_feedback(sample)
            else:
                self._direct.offer(sample)
            return
        try:
            self._queue.put_nowait(sample)
        except asyncio.QueueFull:
            self.dropped += 1
            if self._on_drop is not None:
                self._on_drop()

    def start(self) -> None:
        """Start draining (inside the running loop)."""
        if self.discards:
            return
        self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                if isinstance(item, Feedback):
                    if isinstance(self.sink, FeedbackSink):
                        await self.sink.feedback(item)
                else:
                    await self.sink.handle(item)
            except Exception:  # noqa: BLE001 - a broken sink must not stop the gateway
                rid = item.request_id if isinstance(item, Feedback) else item.stats.request_id
                log.exception("sample sink failed", request_id=rid)
            finally:
                self._queue.task_done()

    async def stop(self, drain_timeout_s: float = 2.0) -> None:
        """Give the sink a moment to take what is queued, then stop."""
        if self._task is None:
            return
        try:
            await asyncio.wait_for(self._queue.join(), drain_timeout_s)
        except TimeoutError:
            log.warning("sample queue not drained at shutdown", left=self._queue.qsize())
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
