"""Limits for the stdlib thread-per-connection HTTP servers (exporter, shipper and sink metrics,
on-call receiver): a read timeout and a cap on connections, so idle sockets cannot pile up threads.

The aiohttp servers (gateway, model server) have their own in `tokenpulse.http_limits`.
"""

from __future__ import annotations

import socketserver
import threading
from http.server import ThreadingHTTPServer
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_CONNECTIONS = 64
_BUSY = b'{"error": "too many connections"}'
_BUSY_ANSWER = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    + f"Content-Length: {len(_BUSY)}\r\nConnection: close\r\n\r\n".encode()
    + _BUSY
)


class ConnectionCap(socketserver.ThreadingMixIn):
    """A thread per connection, at most `max_connections`; the rest get 503 and are closed."""

    daemon_threads = True
    max_connections = DEFAULT_MAX_CONNECTIONS

    def _slots(self) -> threading.BoundedSemaphore:
        slots = self.__dict__.get("_cap_slots")
        if slots is None:
            slots = self.__dict__["_cap_slots"] = threading.BoundedSemaphore(self.max_connections)
        return slots

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots().acquire(blocking=False):
            try:
                request.sendall(_BUSY_ANSWER)
            except OSError:
                pass
            self.shutdown_request(request)  # type: ignore[attr-defined]
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots().release()


class CappedHTTPServer(ConnectionCap, ThreadingHTTPServer):
    """`http.server` with the cap; give its handler class a `timeout` for idle connections."""

    def __init__(self, address: tuple[str, int], handler: type, max_connections: int) -> None:
        self.max_connections = max_connections
        super().__init__(address, handler)


class _CappedWSGIServer(ConnectionCap, WSGIServer):
    allow_reuse_address = True


class _QuietWSGIHandler(WSGIRequestHandler):
    def setup(self) -> None:
        # an idle or trickling connection is closed after the server's timeout, its thread freed
        self.timeout = getattr(self.server, "read_timeout_s", DEFAULT_TIMEOUT_S)  # type: ignore[misc]
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass  # one line per scrape is noise


def make_wsgi_server(
    host: str,
    port: int,
    app: Any,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> WSGIServer:
    """A bound WSGI server (call serve_forever) with the read timeout and the connection cap."""
    server = make_server(
        host, port, app, server_class=_CappedWSGIServer, handler_class=_QuietWSGIHandler
    )
    # read at each connection
    server.max_connections = max_connections
    server.read_timeout_s = timeout_s  # type: ignore[attr-defined]
    return server


def serve_metrics(host: str, port: int, registry: Any) -> WSGIServer:
    """prometheus_client's /metrics app for `registry` on the limited server, in a daemon thread."""
    from prometheus_client import make_wsgi_app

    server = make_wsgi_server(host, port, make_wsgi_app(registry))
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server
