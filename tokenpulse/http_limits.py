"""Connection limits for the aiohttp servers: a request-head deadline, an idle timeout, a cap.

aiohttp bounds header sizes but not the time a client may take to send a request head, so a
client sending one header line every few seconds keeps its connection for as long as it likes.
`start_site(runner, host, port, limits)` listens like `web.TCPSite` but with a protocol that:
- closes a connection whose request head is not complete `header_timeout_s` after the connection
  opened, or after the first byte of a later request, answering 408;
- closes a keep-alive connection idle for `idle_timeout_s` (aiohttp's own keep-alive timer);
- answers 503 and closes when `max_connections` are already open.
Both rejections carry `Connection: close` and a JSON body the caller shapes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, cast

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_server import Server

LINGER_S = 1.0  # how long a rejected connection stays half-open so the answer arrives intact


def tf_serving_error_body(status: int, message: str) -> bytes:
    """TF Serving's REST error shape, `{"error": "..."}`."""
    del status
    return json.dumps({"error": message}).encode()


@dataclass(frozen=True)
class HttpLimits:
    """Per-server connection limits; each component fills them from its settings."""

    header_timeout_s: float = 10.0
    idle_timeout_s: float = 75.0
    max_connections: int = 1024
    error_body: Callable[[int, str], bytes] = tf_serving_error_body

    def __post_init__(self) -> None:
        if self.header_timeout_s <= 0 or self.idle_timeout_s <= 0:
            raise ValueError("header and idle timeouts must be positive")
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")


@dataclass
class ConnectionCounts:
    """What the limits did so far; `on_event` callers may mirror these into metrics."""

    open: int = 0
    header_timeouts: int = 0
    rejected: int = 0
    on_event: Callable[[str], None] | None = field(default=None, repr=False)

    def note(self, event: str) -> None:
        """Count `header_timeout` or `max_connections` and tell the listener."""
        if event == "header_timeout":
            self.header_timeouts += 1
        else:
            self.rejected += 1
        if self.on_event is not None:
            self.on_event(event)


def _raw_response(limits: HttpLimits, status: HTTPStatus, message: str) -> bytes:
    body = limits.error_body(int(status), message)
    head = (
        f"HTTP/1.1 {int(status)} {status.phrase}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        # a refused connection (503) may retry soon: say when, as every other 503 does
        + ("Retry-After: 1\r\n" if status == HTTPStatus.SERVICE_UNAVAILABLE else "")
        + "Connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def _answer_and_close(transport: asyncio.Transport, answer: bytes) -> None:
    """Send `answer`, end our side, and close a moment later.

    Closing at once while the client is still sending makes the kernel answer with a reset,
    which can destroy the answer before the client reads it.
    """
    transport.write(answer)
    if transport.can_write_eof():
        transport.write_eof()
    asyncio.get_running_loop().call_later(LINGER_S, transport.close)


class LimitedRequestHandler(RequestHandler):
    """aiohttp's protocol plus the head deadline and the connection cap."""

    def __init__(
        self, manager: Server, *, limits: HttpLimits, counts: ConnectionCounts, **kwargs: Any
    ) -> None:
        super().__init__(manager, keepalive_timeout=limits.idle_timeout_s, **kwargs)
        self._limits = limits
        self._counts = counts
        self._head_deadline: asyncio.TimerHandle | None = None
        self._rejected = False  # over the cap: never counted, never parsed
        self._answered = False  # head too slow: answered 408, closing

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self._counts.open >= self._limits.max_connections:
            self._rejected = True
            self._counts.note("max_connections")
            message = f"too many open connections (limit {self._limits.max_connections})"
            _answer_and_close(
                cast(asyncio.Transport, transport),
                _raw_response(self._limits, HTTPStatus.SERVICE_UNAVAILABLE, message),
            )
            return
        self._counts.open += 1
        super().connection_made(transport)
        self._arm_head_deadline()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._rejected:
            return
        self._counts.open -= 1
        self._cancel_head_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._rejected or self._answered:
            return  # the answer is out; what the client still sends is dropped
        parsed_before = self._request_count
        super().data_received(data)
        if self._request_count != parsed_before:
            self._cancel_head_deadline()
        elif self._head_deadline is None and self._waiting_for_request():
            # first bytes of a new request on a kept-alive connection
            self._arm_head_deadline()

    def _waiting_for_request(self) -> bool:
        waiter = self._waiter
        return waiter is not None and not waiter.done() and not self._messages

    def _arm_head_deadline(self) -> None:
        loop = asyncio.get_running_loop()
        self._head_deadline = loop.call_later(self._limits.header_timeout_s, self._head_late)

    def _cancel_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_late(self) -> None:
        self._head_deadline = None
        transport = self.transport
        if transport is None or transport.is_closing() or not self._waiting_for_request():
            return
        self._counts.note("header_timeout")
        self._answered = True
        message = f"request head not received within {self._limits.header_timeout_s:g} s"
        answer = _raw_response(self._limits, HTTPStatus.REQUEST_TIMEOUT, message)
        _answer_and_close(cast(asyncio.Transport, transport), answer)


class LimitedSite(web.TCPSite):
    """`web.TCPSite` whose connections are `LimitedRequestHandler`s sharing one count."""

    def __init__(
        self, runner: web.BaseRunner, host: str, port: int, limits: HttpLimits, **kwargs: Any
    ) -> None:
        super().__init__(runner, host, port, **kwargs)
        self.limits = limits
        self.counts = ConnectionCounts()

    def _protocol(self) -> LimitedRequestHandler:
        server = self._runner.server
        if server is None:
            raise RuntimeError("runner is not set up")
        # the same handler arguments `Server.__call__` would pass (access log, parser limits)
        kwargs = dict(server._kwargs)
        kwargs.pop("keepalive_timeout", None)
        return LimitedRequestHandler(
            server, limits=self.limits, counts=self.counts, loop=server._loop, **kwargs
        )

    async def start(self) -> None:
        """Listen as `TCPSite.start` does, with the limited protocol."""
        await web.BaseSite.start(self)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._protocol,
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
        )
        self._bound_port = self._server.sockets[0].getsockname()[1]


async def start_site(
    runner: web.BaseRunner,
    host: str,
    port: int,
    limits: HttpLimits,
    *,
    backlog: int = 1024,
    on_event: Callable[[str], None] | None = None,
) -> LimitedSite:
    """Listen on host:port under `limits`; `on_event` hears each rejection by its reason."""
    site = LimitedSite(runner, host, port, limits, backlog=backlog, reuse_address=True)
    site.counts.on_event = on_event
    await site.start()
    return site
