"""The fault proxy as `up` runs it (a process): taken down by SIGUSR1 it refuses connections and
cuts the ones it holds, as a host that is gone; SIGUSR2 brings it back on the same port."""

from __future__ import annotations

import http.client
import http.server
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from stack.drill.pipeline import refused
from tokenpulse.procs import free_port

Proxy = tuple[subprocess.Popen[bytes], int]  # the process and its port


class _Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - stdlib's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        out = json.dumps({"echo": json.loads(body)}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "stack.drill.proxy", f"--port={port}",
         f"--upstream=http://127.0.0.1:{upstream.server_address[1]}"],
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _wait(lambda: not refused(port))
        yield proc, port
    finally:
        proc.kill()
        proc.wait()
        upstream.shutdown()
        upstream.server_close()


def _wait(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _post(conn: http.client.HTTPConnection, body: object) -> tuple[int, object]:
    conn.request("POST", "/x", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    return resp.status, json.loads(resp.read())


def test_down_refuses_and_cuts_open_connections_and_up_restores(proxy: Proxy) -> None:
    proc, port = proxy
    kept = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    assert _post(kept, {"a": 1}) == (200, {"echo": {"a": 1}})  # kept alive (HTTP/1.1)

    proc.send_signal(signal.SIGUSR1)
    _wait(lambda: refused(port))
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        _post(kept, {"a": 2})  # the connection it held was cut, not left to answer
    proc.send_signal(signal.SIGUSR1)  # down twice is still down
    time.sleep(0.2)
    assert refused(port) and proc.poll() is None

    proc.send_signal(signal.SIGUSR2)
    _wait(lambda: not refused(port))
    again = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    assert _post(again, {"a": 3}) == (200, {"echo": {"a": 3}})
    again.request("GET", "/-/fault")
    assert json.loads(again.getresponse().read()) == {"delay_s": 0.0, "error_ratio": 0.0}
    proc.send_signal(signal.SIGUSR2)  # up twice is still up
    time.sleep(0.2)
    assert _post(again, {"a": 4}) == (200, {"echo": {"a": 4}})

    proc.kill()
    _, err = proc.communicate(timeout=10)
    said = err.decode()
    cut = re.search(rf"down: port {port} refuses connections; open connections cut: (\d+)", said)
    assert cut is not None and int(cut[1]) >= 1, said  # at least the kept one
    assert f"up: listening on {port} again" in said
