"""A streamed job: `continue` calls of a few tokens each, under the unary path's protections.

The rate limit, routing, breaker and admission slot are taken once per stream, as for a unary
request, and the first chunk runs before the response starts: whatever refuses or fails the
stream up to there answers with the same status code as unary. The slot is held until the
stream ends, because the stream keeps the model busy as long as a unary call would. Each chunk
goes to the version the stream was routed to (on any replica serving it: no state crosses calls).

The client's disconnect is checked while a chunk runs: the call is cancelled (its connection to
the model server closed) and no further chunk is asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from serving.gateway.admission import Shed
from serving.gateway.caps import VersionCaps
from serving.gateway.chunkbatch import ContinueCall
from serving.gateway.errors import (
    BadRequest,
    CircuitOpen,
    DeadlineExceeded,
    InvalidParameter,
    Overloaded,
    StreamingUnsupported,
    UpstreamUnavailable,
)
from serving.gateway.jobs import Job
from serving.gateway.keys import ApiKey
from serving.gateway.pipeline import Deadline, Pipeline
from serving.gateway.ratelimit import BudgetTooLarge, Reservation
from serving.gateway.routing import Route
from serving.gateway.signals import repetition_ratio
from serving.gateway.textstream import TextStream
from serving.gateway.upstream import Chunk, UpstreamError, UpstreamHTTPError
from tokenpulse.samples import OutputSignals, RequestStats
from tokenpulse.tfserving.predict import b64
from tokenpulse.tfserving.signature import (
    CONTINUE_SIGNATURE_NAME,
    FINISH_NONE,
    FINISH_STOP,
    join_ids,
)

# TF Serving's answer (400, FAILED_PRECONDITION) for a signature the version does not export
_NO_CONTINUE = f'signature key "{CONTINUE_SIGNATURE_NAME}" not found'


T = TypeVar("T")
DISCONNECT_POLL_S = 0.05  # how soon a chunk in flight notices that its client went away


class ClientGone(Exception):
    """The client closed the connection mid-stream."""


async def unless_gone(call: Awaitable[T], gone: Callable[[], bool]) -> T:
    """Await `call`, cancelling it (and with it the upstream call) when `gone()` says the client
    hung up; raises ClientGone then."""
    task = asyncio.ensure_future(call)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if done:
                return task.result()
            if gone():
                raise ClientGone("client disconnected")
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


@dataclass
class Row:
    """One output of a streamed job as it grows."""

    prompt: str
    text: TextStream
    generated: bytearray = field(default_factory=bytearray)
    ids: list[int] = field(default_factory=list)  # the model's tokens so far, as it chose them
    finish_reason: str = FINISH_NONE
    nll_sum: float = 0.0
    n_scored: int = 0
    output_tokens: int = 0  # the model's tokens (a subword model's bytes are more)
    prompt_tokens: int = 0
    truncated_prompt_tokens: int = 0

    @property
    def done(self) -> bool:
        """No more chunks for this row (the model finished it or a stop sequence did)."""
        return self.finish_reason != FINISH_NONE


@dataclass(frozen=True)
class Piece:
    """Text for one output that may be sent now; `finish_reason` on the output's last piece."""

    index: int
    text: str
    finish_reason: str | None = None


class StreamRun:
    """One streamed job: `start()` runs the first chunk, `next()` each further one, `close()`
    gives back the slot and the unused token budget and fills `stats.outputs`."""

    def __init__(
        self,
        pipeline: Pipeline,
        job: Job,
        key: ApiKey,
        deadline: Deadline,
        stats: RequestStats,
        *,
        chunk_tokens: int,
        first_chunk_tokens: int = 0,
        arrived: float,
        gone: Callable[[], bool] = lambda: False,
        call: ContinueCall | None = None,
    ) -> None:
        self.p = pipeline
        self.job = job
        self.key = key
        self.deadline = deadline
        self.stats = stats
        self.chunk_tokens = chunk_tokens
        self.first_chunk_tokens = first_chunk_tokens or chunk_tokens
        self._arrived = arrived  # perf_counter() at arrival: TTFT counts from there
        self._gone = gone
        self._continue = call or pipeline.client.continue_  # coalesced, or a call of its own
        self.rows = [Row(prompt, TextStream(job.stop)) for prompt in job.prompts]
        self._reservation: Reservation | None = None
        self._holds_slot = False
        self._route: Route | None = None
        self._last_token_at: float | None = None
        self._unsettled = False  # let through by the breaker, no outcome recorded yet
        stats.mode = "stream"

    @property
    def done(self) -> bool:
        """Every output has finished."""
        return all(r.done for r in self.rows)

    def progress(self) -> tuple[int, int]:
        """(prompt tokens, tokens generated) so far, over all outputs."""
        return sum(r.prompt_tokens for r in self.rows), sum(r.output_tokens for r in self.rows)

    async def start(self) -> list[Piece]:
        """Admit the stream and run its first chunk (errors here keep unary's status codes)."""
        try:
            self._reservation = self.p.take_request(self.key, self.job.token_budget, self.stats)
        except BudgetTooLarge as exc:
            raise InvalidParameter(f"request is larger than this key's token limit: {exc}") from exc
        for _attempt in range(2):  # once more if the version vanished
            route = await self.p.route(self.job, self.key)
            self._route = route
            self.stats.version, self.stats.version_label = str(route.version), route.label or ""
            if not self.p.breaker.allow():
                self.stats.breaker_rejected = True
                raise CircuitOpen(
                    "upstream circuit is open", retry_after=self.p.breaker.retry_after()
                )
            self._unsettled = True
            await self._admit()
            settled = await self.p.settle_window(self.job, route, self.deadline)
            chunks = await self._call() if settled else None
            if chunks is not None:
                self._unsettled = False
                self.p.breaker.record_success()
                return self._absorb(chunks, first=True)
            self._release_slot()
            self._settle_neutral()
            await self.p.refresh(self.job.model)
        raise UpstreamUnavailable("model version is no longer available", retry_after=1)

    async def next(self) -> list[Piece]:
        """The next chunk's pieces ([] once done); errors after the first byte raise as well.
        Each chunk gets the whole deadline again: a stream's deadline is an idle one."""
        if self.done:
            return []
        self.deadline = self.deadline.renewed()
        chunks = await self._call()
        if chunks is None:  # the routed version went away mid-stream
            raise UpstreamUnavailable("model version is no longer available", retry_after=1)
        self.p.breaker.record_success()  # a later chunk's success counts as a first one's
        return self._absorb(chunks, first=False)

    def close(self) -> None:
        """Give back the slot and unused budget; record each output's signals."""
        self._release_slot()
        self._settle_neutral()  # frees a half-open probe the stream was let through on
        if self._reservation is not None:
            used = sum(r.output_tokens for r in self.rows)
            self.p.limiter.refund(self._reservation, used)
            self._reservation = None
        if self.stats.outputs or not any(r.generated or r.done for r in self.rows):
            return
        for r in self.rows:
            sent = r.text.sent
            stopped = r.text.stopped
            self.stats.outputs.append(
                OutputSignals(
                    prompt_tokens=r.prompt_tokens,
                    output_tokens=r.output_tokens,
                    finish_reason=FINISH_STOP if stopped else r.finish_reason,
                    empty=not sent.strip(),
                    repetition_ratio=repetition_ratio(sent),
                    mean_nll=r.nll_sum / r.n_scored if r.n_scored else 0.0,
                    truncated_prompt_tokens=r.truncated_prompt_tokens,
                )
            )

    # ---- internals --------------------------------------------------------------------------

    async def _admit(self) -> None:
        queued_at = time.perf_counter()
        try:
            await self.p.admission.acquire(timeout_s=self.deadline.remaining())
        except Shed as exc:
            self.stats.shed = True
            raise Overloaded(f"gateway overloaded: {exc.reason}", retry_after=1) from exc
        self._holds_slot = True
        self.stats.queue_wait_s += time.perf_counter() - queued_at

    def _release_slot(self) -> None:
        if self._holds_slot:
            self._holds_slot = False
            self.p.admission.release()

    def _settle_neutral(self) -> None:
        if self._unsettled:
            self._unsettled = False
            self.p.breaker.record_neutral()

    def _rows(self, caps: VersionCaps) -> list[dict[str, Any]]:
        """The unfinished rows' `continue` inputs: a version that takes the generated ids gets
        them (and counts steps in them); an older one counts its byte tokens."""
        job = self.job
        ending = job.ending(caps.stop_in_graph)
        return [
            {
                "prompt": r.prompt,
                "generated": b64(bytes(r.generated)),
                **({"generated_ids": join_ids(r.ids)} if caps.resumes else {}),
                "step": len(r.ids) if caps.resumes else len(r.generated),
                "chunk": self.chunk_tokens if r.generated else self.first_chunk_tokens,
                "max_new_tokens": job.max_new_tokens,
                "temperature": float(job.temperature),
                "top_k": job.top_k,
                "top_p": float(job.top_p),
                "seed": job.seed,
                **ending,
            }
            for r in self.rows
            if not r.done
        ]

    async def _call(self) -> list[Chunk] | None:
        """One `continue` call for the unfinished rows; None when the version went away."""
        remaining = self.deadline.remaining()
        if remaining <= 0:
            raise DeadlineExceeded("deadline passed while streaming")
        route = self._route
        if route is None:  # start() routes first; kept for type narrowing
            raise UpstreamUnavailable("stream has no route", retry_after=1)
        rows = self._rows(await self.p.version_caps(route, min(remaining, 1.0)))
        started = time.perf_counter()
        try:
            chunks, _seconds = await unless_gone(
                self._continue(route.model, route.version, rows, self.deadline.remaining()),
                self._gone,
            )
        except UpstreamError as exc:
            self.stats.upstream_s += time.perf_counter() - started
            if isinstance(exc, UpstreamHTTPError) and _NO_CONTINUE in exc.message:
                self.p.breaker.record_success()  # healthy: this version cannot stream
                raise StreamingUnsupported(
                    f"model version {route.version} has no `{CONTINUE_SIGNATURE_NAME}` "
                    "signature (exported before streaming): re-export it to stream, or send "
                    "stream: false",
                    param="stream",
                ) from exc
            self.p.upstream_failed(exc, self.deadline)  # raises, or says: route again
            return None
        self.stats.upstream_s += time.perf_counter() - started
        self.stats.chunks += 1
        return chunks

    def _absorb(self, chunks: list[Chunk], first: bool) -> list[Piece]:
        now = time.perf_counter()
        live = [(i, r) for i, r in enumerate(self.rows) if not r.done]
        pieces: list[Piece] = []
        produced = 0
        for (i, row), chunk in zip(live, chunks, strict=True):
            if first:
                row.prompt_tokens = chunk.prompt_tokens
                row.truncated_prompt_tokens = chunk.truncated_prompt_tokens
            produced = max(produced, len(chunk.tokens))
            row.generated += chunk.tokens
            row.ids += chunk.ids
            row.nll_sum += chunk.nll_sum
            row.n_scored += chunk.n_scored
            row.output_tokens += chunk.output_tokens
            row.finish_reason = chunk.finish_reason
            text = row.text.feed(chunk.tokens, final=row.done)
            if row.text.stopped:
                row.finish_reason = FINISH_STOP
            if text or row.done:
                pieces.append(Piece(i, text, row.finish_reason if row.done else None))
        if first:
            self._check_window()
        if produced:
            if self._last_token_at is None:
                self.stats.time_to_first_token_s = now - self._arrived
            else:
                self.stats.chunk_gaps.append((now - self._last_token_at, produced))
                self.stats.decode_s += now - self._last_token_at
            self._last_token_at = now
        return pieces

    def _check_window(self) -> None:
        dropped = max(r.truncated_prompt_tokens for r in self.rows)
        if dropped and self.job.truncate_prompt_tokens != -1:
            # as unary: the model's window is smaller than the gateway was told
            raise BadRequest(
                f"the model dropped {dropped} prompt tokens to fit its context window, which is "
                f"smaller than this gateway's setting of {self.p.settings.context_window_tokens}; "
                "shorten the prompt or set truncate_prompt_tokens",
                param="prompt",
            )
