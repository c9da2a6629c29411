"""BackgroundServer: serves an aiohttp app from a thread, stops, restarts on the same port."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest
from aiohttp import web

from devtools.standins.background import BackgroundServer


def _app() -> web.Application:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/", hello)
    return app


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return str(resp.read().decode())


def test_serves_stops_and_restarts_on_the_same_port():
    with BackgroundServer(_app) as server:
        port = server.port
        assert port > 0 and _get(server.url) == "hello"
        server.stop()
        with pytest.raises(urllib.error.URLError):
            _get(server.url)
        server.start()
        assert server.port == port and _get(server.url) == "hello"
    with pytest.raises(urllib.error.URLError):
        _get(server.url)
    server.stop()  # stopping a stopped server is a no-op


def test_a_port_that_is_taken_is_a_clear_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = BackgroundServer(_app, port=taken.getsockname()[1], name="my-standin")
        with pytest.raises(RuntimeError, match="my-standin did not start"):
            server.start()
