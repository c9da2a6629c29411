"""The drills' fault proxy. As `up` runs it (a process): taken down by SIGUSR1 it refuses
connections and cuts the ones it holds, as a host that is gone; SIGUSR2 brings it back on the same
port. In-process (`proxy.serve`): it passes through, delays and fails on request."""

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
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from stack.drill import proxy as fault_proxy
from stack.drill.pipeline import refused
from tokenpulse.procs import free_port

Proxy = tuple[subprocess.Popen[bytes], int]  # the process and its port


class _Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - stdlib's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        out = json.dumps({"echo": json.loads(body), "path": self.path}).encode()
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
    assert _post(kept, {"a": 1}) == (200, {"echo": {"a": 1}, "path": "/x"})  # kept alive (HTTP/1.1)

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
    assert _post(again, {"a": 3}) == (200, {"echo": {"a": 3}, "path": "/x"})
    again.request("GET", "/-/fault")
    assert json.loads(again.getresponse().read()) == {"delay_s": 0.0, "error_ratio": 0.0}
    proc.send_signal(signal.SIGUSR2)  # up twice is still up
    time.sleep(0.2)
    assert _post(again, {"a": 4}) == (200, {"echo": {"a": 4}, "path": "/x"})

    proc.kill()
    _, err = proc.communicate(timeout=10)
    said = err.decode()
    cut = re.search(rf"down: port {port} refuses connections; open connections cut: (\d+)", said)
    assert cut is not None and int(cut[1]) >= 1, said  # at least the kept one
    assert f"up: listening on {port} again" in said


@pytest.fixture
def proxied() -> Iterator[str]:
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    server = fault_proxy.serve(free_port(), f"http://127.0.0.1:{upstream.server_address[1]}")
    for s in (upstream, server):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    for s in (server, upstream):
        s.shutdown()
        s.server_close()


def _call(url: str, body: object, method: str = "POST") -> tuple[int, dict]:
    req = urllib.request.Request(url, json.dumps(body).encode(), method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_fault_proxy_passes_through_delays_and_fails_on_request(proxied: str) -> None:
    assert _call(f"{proxied}/v1/models/gen:predict", {"a": 1}) == (
        200, {"echo": {"a": 1}, "path": "/v1/models/gen:predict"},
    )  # fmt: skip
    assert _call(f"{proxied}/-/fault", {"delay_s": 0.5}, "PUT") == (
        200, {"delay_s": 0.5, "error_ratio": 0.0},
    )  # fmt: skip
    started = time.monotonic()
    assert _call(f"{proxied}/x", {})[0] == 200
    assert time.monotonic() - started >= 0.5
    _call(f"{proxied}/-/fault", {"error_ratio": 1.0}, "PUT")
    status, doc = _call(f"{proxied}/x", {})
    assert status == 503 and "injected" in doc["error"]
    status, doc = _call(f"{proxied}/-/fault", {"error_ratio": 2}, "PUT")
    assert status == 400 and "error_ratio" in doc["error"]
    assert _call(f"{proxied}/-/fault", {}, "PUT")[1] == {"delay_s": 0.0, "error_ratio": 0.0}
    assert _call(f"{proxied}/x", {})[0] == 200


def test_an_oversized_or_unreadable_fault_document_is_refused_unread(proxied: str) -> None:
    big = {"delay_s": 0.5, "pad": "x" * 10_000}
    status, doc = _call(f"{proxied}/-/fault", big, "PUT")
    assert status == 413 and "4096" in doc["error"]
    host, port = proxied.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.putrequest("PUT", "/-/fault")
    conn.putheader("Content-Length", "abc")
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 400 and b"Content-Length" in resp.read()
    assert _call(f"{proxied}/-/fault", {}, "PUT") == (200, {"delay_s": 0.0, "error_ratio": 0.0})


def test_a_refusal_fault_fails_only_predicts_with_the_status_and_message_set(proxied: str) -> None:
    # a version that refuses every request: predicts get TF Serving's 400, the status still reads
    refusal = {"error_ratio": 1.0, "error_status": 400, "scope": "predict",
               "error_message": "Failed precondition: injected"}  # fmt: skip
    assert _call(f"{proxied}/-/fault", refusal, "PUT") == (200, {"delay_s": 0.0, **refusal})
    assert _call(f"{proxied}/v1/models/gen/versions/1:predict", {"a": 1}) == (
        400, {"error": "Failed precondition: injected"},
    )  # fmt: skip
    assert _call(f"{proxied}/v1/models/gen", {"a": 2})[0] == 200  # no predict: passed through
    for bad, word in (
        ({"error_status": 200}, "error_status"),
        ({"error_status": "400"}, "error_status"),
        ({"error_message": ""}, "error_message"),
        ({"scope": "status"}, "scope"),
    ):
        status, doc = _call(f"{proxied}/-/fault", {"error_ratio": 1.0, **bad}, "PUT")
        assert status == 400 and word in doc["error"], bad
    # leaving the keys out restores the default: every request, 503
    _call(f"{proxied}/-/fault", {"error_ratio": 1.0}, "PUT")
    assert _call(f"{proxied}/v1/models/gen", {})[0] == 503
    assert _call(f"{proxied}/-/fault", {}, "PUT") == (200, {"delay_s": 0.0, "error_ratio": 0.0})
