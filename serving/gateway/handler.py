"""The one request handler every endpoint stands on.

It writes each request's id (`X-Request-ID`: the client's when well-formed, else a new one) and
its error response in one place, in the endpoint's error shape; it refuses requests while the
gateway drains. Generation (`serve`) takes one `Endpoint` (native, completions, chat) through
the same steps for the unary and the streamed path: authenticate, read, parse, check the model,
then one answer, or a stream of events whose first chunk runs before the response starts (so a
refusal keeps unary's status codes) and whose later failures end it with an error event.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web
from pydantic import BaseModel

from serving.gateway import sse
from serving.gateway.chunkbatch import ChunkBatcher
from serving.gateway.drain import Drain
from serving.gateway.errors import GatewayError, PayloadTooLarge, dump
from serving.gateway.jobs import Job, Limits
from serving.gateway.keys import ApiKey, KeyStore
from serving.gateway.metrics import CLIENT_GONE, GatewayMetrics
from serving.gateway.outcome import Outcomes
from serving.gateway.pipeline import Pipeline, authenticate, deadline_for
from serving.gateway.protocol import Endpoint
from serving.gateway.settings import GatewaySettings
from serving.gateway.streaming import ClientGone, StreamRun, unless_gone
from tokenpulse.logging import get_logger
from tokenpulse.samples import RequestStats

log = get_logger(__name__)
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
ErrorShape = Callable[[GatewayError, str], BaseModel]


def json_response(
    body: BaseModel, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON answer."""
    return web.Response(
        body=dump(body), status=status, content_type="application/json", headers=headers
    )


def request_id(request: web.Request) -> str:
    """The client's `X-Request-ID` when well-formed, else a new one."""
    given = request.headers.get("X-Request-ID", "")
    return given if _REQUEST_ID.match(given) else secrets.token_hex(12)


@dataclass
class Call:
    """One request as the handler carries it: its id, key, headers and (generation) its job."""

    request: web.Request
    route: str
    rid: str
    start: float = field(default_factory=time.perf_counter)  # TTFT and latency count from here
    arrival: float = field(default_factory=time.time)
    key: ApiKey | None = None
    stats: RequestStats | None = None
    job: Job | None = None
    texts: list[str] = field(default_factory=list)

    def gone(self) -> bool:
        """The client closed its connection."""
        transport = self.request.transport
        return transport is None or transport.is_closing()


@dataclass
class Handler:
    """Answers requests: the request id, the key, the body and every error, written once."""

    settings: GatewaySettings
    keys: Callable[[], KeyStore]  # the keys loaded now (the keys file is re-read while running)
    pipeline: Pipeline
    limits: Limits
    chunks: ChunkBatcher | None  # coalesced `continue` calls, or None: each stream calls alone
    metrics: GatewayMetrics
    outcomes: Outcomes
    drain: Drain

    # ---- every endpoint ---------------------------------------------------------------------

    async def answer(
        self, call: Call, shape: ErrorShape, work: Callable[[Call], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """`work`'s response, or the error it raised in `shape`; refused while draining."""
        try:
            with self.drain.request():
                resp = await work(call)
        except GatewayError as err:
            resp = self._error(call, shape, err)
        except Exception:  # noqa: BLE001 - a bug must still answer in the endpoint's shape
            log.exception("unhandled error", request_id=call.rid, route=call.route)
            resp = self._error(call, shape, GatewayError("internal error"))
        if self.drain.draining:
            resp.force_close()  # the client's next request goes to a replica that stays
        return resp

    def authenticate(self, call: Call) -> ApiKey:
        """The caller's key (401 without a valid one)."""
        call.key = authenticate(self.keys(), call.request.headers.get("Authorization"))
        if call.stats is not None:
            call.stats.key_id = call.key.id
        return call.key

    async def read(self, request: web.Request) -> bytes:
        """The body, at most `max_body_bytes` (413 beyond)."""
        limit = self.settings.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            raise PayloadTooLarge(f"body is larger than {limit} bytes")
        try:
            return await request.read()
        except web.HTTPRequestEntityTooLarge as exc:
            raise PayloadTooLarge(f"body is larger than {limit} bytes") from exc

    def headers(self, call: Call, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The request id, `extra`, and the key's rate-limit headers once the key is known."""
        headers = {"X-Request-ID": call.rid, **(extra or {})}
        if call.key is not None:
            headers.update(self.pipeline.limit_headers(call.key))
        return headers

    def _error(self, call: Call, shape: ErrorShape, err: GatewayError) -> web.Response:
        status = err.status
        if call.stats is not None:
            call.stats.status, call.stats.error_code = status, err.code
        headers = self.headers(call, err.response_headers())
        return json_response(shape(err, call.rid), status, headers)

    # ---- generation -------------------------------------------------------------------------

    async def serve(self, request: web.Request, endpoint: Endpoint) -> web.StreamResponse:
        """One generation request of `endpoint`, unary or streamed."""
        call = Call(request, endpoint.route, request_id(request))
        stats = call.stats = RequestStats(request_id=call.rid, route=endpoint.route)
        in_flight = self.metrics.in_flight.labels(endpoint.route)
        in_flight.inc()
        try:
            return await self.answer(
                call, endpoint.error_body, lambda c: self._generate(c, endpoint, stats)
            )
        finally:
            in_flight.dec()
            stats.total_s = time.perf_counter() - call.start
            self.outcomes.record(stats, call.job, call.texts, call.arrival)

    async def _generate(
        self, call: Call, endpoint: Endpoint, stats: RequestStats
    ) -> web.StreamResponse:
        key = self.authenticate(call)
        raw = await self.read(call.request)
        try:
            job = call.job = endpoint.parse(raw, self.limits)
        except GatewayError:
            stats.mode = _asked_mode(raw)  # a refused stream is still a stream
            raise
        stats.model = job.model
        stats.mode = "stream" if job.stream else "unary"  # also if refused before it starts
        self.pipeline.check_model(key, job.model)
        deadline = deadline_for(call.request.headers, call.start, self.settings)
        try:
            if job.stream:
                return await self._stream(call, endpoint, StreamRun(
                    self.pipeline, job, key, deadline, stats,
                    chunk_tokens=self.settings.stream_chunk_tokens,
                    first_chunk_tokens=self.settings.stream_first_chunk_tokens,
                    arrived=call.start, gone=call.gone,
                    call=self.chunks.continue_ if self.chunks else None,
                ))  # fmt: skip
            run = self.pipeline.run(job, key, deadline, stats)
            call.texts = await self.drain.until(unless_gone(run, call.gone))
        except ClientGone:
            # the client hung up: the upstream call was cancelled, and the outcome is its own
            _gone(stats)
            return web.Response(status=CLIENT_GONE)
        stats.total_s = time.perf_counter() - call.start
        body = endpoint.respond(job, call.texts, stats)
        return json_response(body, headers=self.headers(call, _version(stats)))

    async def _stream(self, call: Call, endpoint: Endpoint, run: StreamRun) -> web.StreamResponse:
        """Answer with server-sent events. Up to the first chunk, a failure raises (answered
        with its status code); after it, it ends the stream with an error event and [DONE]."""
        stats = run.stats
        events = endpoint.stream(run.job, stats, run.progress)
        try:
            first = await self.drain.until(run.start())
        except ClientGone:
            run.close()
            call.texts = [r.text.sent for r in run.rows]
            raise
        except BaseException:
            run.close()
            raise
        headers = self.headers(call, {**sse.HEADERS, **_version(stats)})
        resp = web.StreamResponse(status=200, headers=headers)
        try:
            await resp.prepare(call.request)
            await _write(resp, [*events.begin(), *events.pieces(first)])
            while not run.done:
                await _write(resp, events.pieces(await self.drain.until(run.next())))
            run.close()
            await _write(resp, events.end())
            await resp.write(sse.DONE)
        except (ClientGone, ConnectionResetError):
            _gone(stats)
        except GatewayError as err:
            stats.status, stats.error_code = err.status, err.code
            await _write_quietly(resp, sse.error_event(err, call.rid))
        except Exception:  # noqa: BLE001 - a bug still ends the stream in the OpenAI shape
            log.exception("unhandled error", request_id=call.rid, route=call.route)
            internal = GatewayError("internal error")
            stats.status, stats.error_code = 500, internal.code
            await _write_quietly(resp, sse.error_event(internal, call.rid))
        finally:
            run.close()
            call.texts = [r.text.sent for r in run.rows]
        return resp


def _version(stats: RequestStats) -> dict[str, str]:
    headers = {"X-Model-Version": stats.version}
    if stats.version_label:
        headers["X-Model-Version-Label"] = stats.version_label
    return headers


def _gone(stats: RequestStats) -> None:
    """The client left before the end: its own outcome (499, as nginx logs it), not an error."""
    stats.disconnected = True
    stats.status, stats.error_code = CLIENT_GONE, "client_disconnected"


def _asked_mode(raw: bytes) -> str:
    """The mode a refused body asked for: "stream" for `"stream": true`, else "unary"."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return "unary"
    return "stream" if isinstance(body, dict) and body.get("stream") is True else "unary"


async def _write(resp: web.StreamResponse, events: list[BaseModel]) -> None:
    if events:
        await resp.write(b"".join(sse.event(e) for e in events))


async def _write_quietly(resp: web.StreamResponse, data: bytes) -> None:
    try:
        await resp.write(data + sse.DONE)
    except ConnectionResetError:
        pass  # the client left as well
