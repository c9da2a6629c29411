"""The drills' fault proxy: an HTTP reverse proxy that can delay or fail what it forwards.

`tokenpulse up --fault-proxy-port P` starts it between the gateway and the model server, and
`up --es-fault-proxy-port E` one between the shipper and Elasticsearch, so a drill can make an
upstream slow, failing or unreachable without a fault path in the components:

    python -m stack.drill.proxy --port P --upstream http://127.0.0.1:8501

GET/PUT /-/fault reads or sets `{"delay_s": 3.0, "error_ratio": 0.0}` (errors answer 503 with a
TF-Serving-style `{"error": ...}` body); GET /-/healthz answers 200. Everything else goes to the
upstream (http or https), one request per thread, with its status, headers and body passed back.
Three optional keys shape the injected errors (shown only when set): `error_status` (400-599,
default 503), `error_message` (the `error` text) and `scope` ("all", the default, or "predict":
only `POST ...:predict` fails, while the model status stays readable, as from a TF Serving
whose version refuses every request, e.g. FAILED_PRECONDITION answered 400).

SIGUSR1 takes the proxy down: it stops listening and cuts the connections it holds, so clients
see refused connections, as from a host that is gone; SIGUSR2 brings it back on the same port.
Signals, not the HTTP control: a port that refuses connections cannot carry its own restore.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import signal
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CONTROL = "/-/fault"
HEALTH = "/-/healthz"
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host"}
MAX_DELAY_S = 120.0
MAX_CONTROL_BYTES = 4096  # a fault document is a few dozen bytes; more is refused unread
DEFAULT_ERROR = {"error_status": 503, "error_message": "fault proxy: injected upstream failure",
                 "scope": "all"}  # fmt: skip
SCOPES = ("all", "predict")
PREDICT_SUFFIX = ":predict"  # TF Serving REST: POST /v1/models/<m>[/versions/<v>]:predict
MAX_MESSAGE_CHARS = 512


class FaultError(ValueError):
    """A fault document that the proxy cannot apply."""


class Faults:
    """The current fault, shared by every handler thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.delay_s = 0.0
        self.error_ratio = 0.0
        self.error: dict[str, Any] = dict(DEFAULT_ERROR)

    def set(self, doc: Any) -> dict[str, Any]:
        """Apply `{"delay_s": .., "error_ratio": .., ...}` (missing keys reset to defaults)."""
        if not isinstance(doc, dict) or set(doc) - {"delay_s", "error_ratio", *DEFAULT_ERROR}:
            raise FaultError("body must be an object with delay_s and/or error_ratio (and "
                             "optionally error_status, error_message, scope)")  # fmt: skip
        try:
            delay, ratio = float(doc.get("delay_s", 0.0)), float(doc.get("error_ratio", 0.0))
        except (TypeError, ValueError) as exc:
            raise FaultError("delay_s and error_ratio must be numbers") from exc
        if not 0.0 <= delay <= MAX_DELAY_S:
            raise FaultError(f"delay_s must be between 0 and {MAX_DELAY_S:g}")
        if not 0.0 <= ratio <= 1.0:
            raise FaultError("error_ratio must be between 0 and 1")
        error = _error_shape(doc)
        with self._lock:
            self.delay_s, self.error_ratio, self.error = delay, ratio, error
        return self.get()

    def get(self) -> dict[str, Any]:
        """The current fault (the error's shape only where it differs from the default)."""
        with self._lock:
            changed = {k: v for k, v in self.error.items() if v != DEFAULT_ERROR[k]}
            return {"delay_s": self.delay_s, "error_ratio": self.error_ratio, **changed}

    def fails(self, method: str, path: str) -> tuple[int, str] | None:
        """(status, message) when this request is to fail now, else None."""
        with self._lock:
            ratio, error = self.error_ratio, self.error
        if error["scope"] == "predict" and not (
            method == "POST" and path.split("?")[0].endswith(PREDICT_SUFFIX)
        ):
            return None
        if ratio and random.random() < ratio:  # noqa: S311
            return error["error_status"], error["error_message"]
        return None


def _error_shape(doc: dict[str, Any]) -> dict[str, Any]:
    """The injected error's status, message and scope from a fault document, checked."""
    status = doc.get("error_status", DEFAULT_ERROR["error_status"])
    message = doc.get("error_message", DEFAULT_ERROR["error_message"])
    scope = doc.get("scope", DEFAULT_ERROR["scope"])
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
        raise FaultError("error_status must be an HTTP error status, 400 to 599")
    if not isinstance(message, str) or not 0 < len(message) <= MAX_MESSAGE_CHARS:
        raise FaultError(f"error_message must be a text of 1 to {MAX_MESSAGE_CHARS} characters")
    if scope not in SCOPES:
        raise FaultError(f"scope must be one of {', '.join(SCOPES)}")
    return {"error_status": status, "error_message": message, "scope": scope}


def make_handler(upstream: str, faults: Faults) -> type[BaseHTTPRequestHandler]:
    """A handler class forwarding to `upstream` (http://host:port) under `faults`."""
    target = urllib.parse.urlsplit(upstream)
    https = target.scheme == "https"
    host, port = target.hostname or "127.0.0.1", target.port or (443 if https else 80)
    connection = http.client.HTTPSConnection if https else http.client.HTTPConnection

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "tokenpulse-fault-proxy"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
            pass  # one line per request would drown the drill's logs

        def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in (headers or {"Content-Type": "application/json"}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _control(self) -> None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                self._reply(400, b'{"error": "Content-Length must be a number"}')
                return
            if length > MAX_CONTROL_BYTES:
                self.close_connection = True  # the body stays unread
                self._reply(413, json.dumps({"error": f"fault document over {MAX_CONTROL_BYTES} "
                                             "bytes"}).encode())  # fmt: skip
                return
            try:
                state = faults.set(json.loads(self._body() or b"{}"))
            except (ValueError, FaultError) as exc:
                self._reply(400, json.dumps({"error": str(exc)}).encode())
                return
            self._reply(200, json.dumps(state).encode())

        def _forward(self) -> None:
            body = self._body()
            fault = faults.get()
            if fault["delay_s"]:
                time.sleep(fault["delay_s"])
            failure = faults.fails(self.command, self.path)
            if failure is not None:
                self._reply(failure[0], json.dumps({"error": failure[1]}).encode())
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
            conn = connection(host, port, timeout=300)
            try:
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                out = {k: v for k, v in resp.getheaders() if k.lower() not in HOP_HEADERS}
                out.pop("Content-Length", None)
                self._reply(resp.status, data, out)
            except OSError as exc:
                self._reply(502, json.dumps({"error": f"fault proxy: upstream: {exc}"}).encode())
            finally:
                conn.close()

        def do_GET(self) -> None:  # noqa: N802 - stdlib's name
            if self.path == HEALTH:
                self._reply(200, b'{"status": "ok"}')
            elif self.path == CONTROL:
                self._reply(200, json.dumps(faults.get()).encode())
            else:
                self._forward()

        def do_PUT(self) -> None:  # noqa: N802 - stdlib's name
            if self.path == CONTROL:
                self._control()
            else:
                self._forward()

        def do_POST(self) -> None:  # noqa: N802 - stdlib's name
            self._forward()

    return Handler


class ProxyServer(ThreadingHTTPServer):
    """A threading HTTP server that knows its open connections, so it can cut them."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def cut(self) -> int:
        """Shut down every open connection (its handler then fails); how many there were."""
        with self._open_lock:
            open_now = list(self._open)
        for sock in open_now:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # closed meanwhile
        return len(open_now)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a connection cut by `down` fails its handler: expected, not a traceback


def serve(
    port: int, upstream: str, host: str = "127.0.0.1", faults: Faults | None = None
) -> ProxyServer:
    """A proxy server bound to host:port (not yet serving: call serve_forever)."""
    return ProxyServer((host, port), make_handler(upstream, faults or Faults()))


class Listener:
    """The proxy on its port, which can be taken down (refusing) and brought back (same port,
    same faults)."""

    def __init__(self, port: int, upstream: str, host: str = "127.0.0.1") -> None:
        self.port, self.upstream, self.host = port, upstream, host
        self.faults = Faults()
        self.server: ProxyServer | None = None

    def start(self) -> None:
        """Listen (again); nothing when already listening. OSError when the port is taken."""
        if self.server is None:
            self.server = serve(self.port, self.upstream, self.host, self.faults)
            threading.Thread(target=self.server.serve_forever, name="proxy", daemon=True).start()

    def stop(self) -> int:
        """Stop listening and cut the open connections; how many were cut."""
        if self.server is None:
            return 0
        server, self.server = self.server, None
        server.shutdown()
        server.server_close()  # the port refuses from here on
        return server.cut()


def _say(message: str) -> None:
    sys.stderr.write(f"fault proxy: {message}\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    """Run the proxy until killed; SIGUSR1 takes it down, SIGUSR2 brings it back."""
    parser = argparse.ArgumentParser(
        prog="python -m stack.drill.proxy", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--port", type=int, required=True, help="listen port on 127.0.0.1")
    parser.add_argument("--upstream", required=True, help="http(s)://host:port to forward to")
    args = parser.parse_args(argv)
    toggles = {signal.SIGUSR1, signal.SIGUSR2}
    # blocked before any thread starts (threads inherit the mask): only sigwait takes them, in
    # this thread, one at a time, so a down and an up can never interleave
    signal.pthread_sigmask(signal.SIG_BLOCK, toggles)
    listener = Listener(args.port, args.upstream)
    listener.start()
    _say(f"listening on {args.port}, forwarding to {args.upstream}")
    while True:
        if signal.sigwait(toggles) == signal.SIGUSR1:
            cut = listener.stop()
            _say(f"down: port {args.port} refuses connections; open connections cut: {cut}")
            continue
        try:
            listener.start()
        except OSError as exc:
            _say(f"cannot listen on {args.port} again: {exc}; send SIGUSR2 to retry")
            continue
        _say(f"up: listening on {args.port} again")


if __name__ == "__main__":
    raise SystemExit(main())
