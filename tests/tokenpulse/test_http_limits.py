"""Connection limits: slow heads and idle connections are closed, a cap rejects, others proceed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.support.rawclient import RawClient
from tokenpulse.http_limits import HttpLimits, LimitedSite, start_site

# generous: only a connection the limits never close would hit it
CLOSE_WAIT_S = 15.0


async def _hello(_request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


@asynccontextmanager
async def serving(limits: HttpLimits) -> AsyncIterator[LimitedSite]:
    app = web.Application()
    app.router.add_get("/", _hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    events: list[str] = []
    try:
        site = await start_site(runner, "127.0.0.1", 0, limits, on_event=events.append)
        yield site
    finally:
        await runner.cleanup()


async def _read_to_eof(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.read(), CLOSE_WAIT_S)


async def _get(port: int) -> int:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/") as resp:
            await resp.read()
            return resp.status


def run(coro: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(coro())


@pytest.mark.parametrize("kind", ["silent", "slow_header"])
def test_slow_and_silent_heads_get_408_while_others_are_served(kind: str) -> None:
    limits = HttpLimits(header_timeout_s=0.5, idle_timeout_s=60.0, max_connections=1000)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        async with serving(limits) as site:
            clients = [
                (await loop.create_connection(RawClient, "127.0.0.1", site.port))[1]
                for _ in range(300)
            ]

            async def trickle(client: RawClient) -> None:
                # a partial head, then one more header line every 0.1 s, never the blank line,
                # until the answer begins (writing past the server's close ends in a reset)
                client.send(b"GET / HTTP/1.1\r\nHost: x\r\n")
                n = 0
                while not client.answered():
                    client.send(f"X-Slow-{n}: 1\r\n".encode())
                    n += 1
                    await asyncio.sleep(0.1)

            tricklers = []
            if kind == "slow_header":
                tricklers = [asyncio.create_task(trickle(c)) for c in clients]
            statuses = [await _get(site.port) for _ in range(20)]
            answers = await asyncio.wait_for(
                asyncio.gather(*(c.closed for c in clients)), CLOSE_WAIT_S
            )
            await asyncio.gather(*tricklers)
            assert statuses == [200] * 20
            for answer in answers:
                head, _, body = answer.partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 408 Request Timeout")
                assert b"Connection: close" in head
                assert "request head not received within 0.5 s" in json.loads(body)["error"]
            assert site.counts.header_timeouts == 300

    run(scenario)


def test_idle_keep_alive_connection_is_closed_after_a_request() -> None:
    limits = HttpLimits(header_timeout_s=30.0, idle_timeout_s=0.5)

    async def scenario() -> None:
        async with serving(limits) as site:
            reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200")
            length = int(
                next(h for h in head.split(b"\r\n") if h.startswith(b"Content-Length")).split(b":")[
                    1
                ]
            )
            await reader.readexactly(length)
            # nothing more is sent; the idle timer, not the head deadline, ends the connection
            assert await _read_to_eof(reader) == b""
            assert site.counts.header_timeouts == 0
            writer.close()

    run(scenario)


def test_connection_cap_answers_503_and_frees_slots() -> None:
    limits = HttpLimits(header_timeout_s=30.0, idle_timeout_s=60.0, max_connections=5)

    async def scenario() -> None:
        async with serving(limits) as site:
            held = [await asyncio.open_connection("127.0.0.1", site.port) for _ in range(5)]
            reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
            answer = await _read_to_eof(reader)
            writer.close()
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503 Service Unavailable")
            # a client's retry loop waits as told (OpenAI's SDK reads Retry-After on a 503)
            assert b"\r\nRetry-After: 1" in head
            assert json.loads(body) == {"error": "too many open connections (limit 5)"}
            assert site.counts.rejected == 1
            for _, held_writer in held:
                held_writer.close()
                await held_writer.wait_closed()
            while site.counts.open:
                await asyncio.sleep(0.01)
            assert await _get(site.port) == 200

    run(scenario)


def test_limits_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="positive"):
        HttpLimits(header_timeout_s=0)
    with pytest.raises(ValueError, match="at least 1"):
        HttpLimits(max_connections=0)
