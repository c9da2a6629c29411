"""The stdlib servers' limits: idle connections are closed, more than the cap get 503."""

from __future__ import annotations

import socket
import threading
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from tokenpulse.threaded_http import make_wsgi_server, serve_metrics


def _app(environ: dict, start_response) -> list[bytes]:  # type: ignore[no-untyped-def]
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]


@pytest.fixture
def port() -> Iterator[int]:
    server = make_wsgi_server("127.0.0.1", 0, _app, max_connections=4, timeout_s=0.5)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_idle_connections_are_closed_and_the_cap_answers_503(port: int) -> None:
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
    extra = socket.create_connection(("127.0.0.1", port))
    extra.settimeout(5)
    assert extra.recv(100).startswith(b"HTTP/1.1 503")
    for s in idle:
        s.settimeout(5)
        assert s.recv(1) == b""  # closed by the server after timeout_s
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
        assert resp.read() == b"ok"  # the slots came back


def test_serve_metrics_serves_the_registry() -> None:
    registry = CollectorRegistry()
    Counter("tokenpulse_test_things", "Things.", registry=registry).inc()
    server = serve_metrics("127.0.0.1", 0, registry)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            assert b"tokenpulse_test_things_total 1.0" in resp.read()
    finally:
        server.shutdown()
        server.server_close()
