"""The drills' fault proxy: an HTTP reverse proxy that can delay or fail what it forwards.

`tokenpulse up --fault-proxy-port P` starts it between the gateway and the model server, so a drill
can make the upstream slow or failing without a fault path in the model server or the gateway:

    python -m stack.drill.proxy --port P --upstream http://127.0.0.1:8501

GET/PUT /-/fault reads or sets `{"delay_s": 3.0, "error_ratio": 0.0}` (errors answer 503 with a
TF-Serving-style `{"error": ...}` body); GET /-/healthz answers 200. Everything else goes to the
upstream, one request per thread, with the upstream's status, headers and body passed back.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CONTROL = "/-/fault"
HEALTH = "/-/healthz"
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host"}
MAX_DELAY_S = 120.0


class FaultError(ValueError):
    """A fault document that the proxy cannot apply."""


class Faults:
    """The current fault, shared by every handler thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.delay_s = 0.0
        self.error_ratio = 0.0

    def set(self, doc: Any) -> dict[str, float]:
        """Apply `{"delay_s": .., "error_ratio": ..}` (missing keys reset to 0)."""
        if not isinstance(doc, dict) or set(doc) - {"delay_s", "error_ratio"}:
            raise FaultError("body must be an object with delay_s and/or error_ratio")
        try:
            delay, ratio = float(doc.get("delay_s", 0.0)), float(doc.get("error_ratio", 0.0))
        except (TypeError, ValueError) as exc:
            raise FaultError("delay_s and error_ratio must be numbers") from exc
        if not 0.0 <= delay <= MAX_DELAY_S:
            raise FaultError(f"delay_s must be between 0 and {MAX_DELAY_S:g}")
        if not 0.0 <= ratio <= 1.0:
            raise FaultError("error_ratio must be between 0 and 1")
        with self._lock:
            self.delay_s, self.error_ratio = delay, ratio
        return self.get()

    def get(self) -> dict[str, float]:
        """The current fault."""
        with self._lock:
            return {"delay_s": self.delay_s, "error_ratio": self.error_ratio}


def make_handler(upstream: str, faults: Faults) -> type[BaseHTTPRequestHandler]:
    """A handler class forwarding to `upstream` (http://host:port) under `faults`."""
    target = urllib.parse.urlsplit(upstream)
    host, port = target.hostname or "127.0.0.1", target.port or 80

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
            if fault["error_ratio"] and random.random() < fault["error_ratio"]:  # noqa: S311
                self._reply(503, b'{"error": "fault proxy: injected upstream failure"}')
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
            conn = http.client.HTTPConnection(host, port, timeout=300)
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


def serve(port: int, upstream: str, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A proxy server bound to host:port (not yet serving: call serve_forever)."""
    server = ThreadingHTTPServer((host, port), make_handler(upstream, Faults()))
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    """Run the proxy until killed."""
    parser = argparse.ArgumentParser(prog="python -m stack.drill.proxy", description=__doc__)
    parser.add_argument("--port", type=int, required=True, help="listen port on 127.0.0.1")
    parser.add_argument("--upstream", required=True, help="http://host:port to forward to")
    args = parser.parse_args(argv)
    serve(args.port, args.upstream).serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
