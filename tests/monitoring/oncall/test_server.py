"""The local on-call receiver: appends notifications, prints one line per alert, refuses junk."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from monitoring.oncall.server import OncallSettings, alert_line, serve

NOTE = {
    "version": "4",
    "status": "firing",
    "receiver": "pager",
    "alerts": [
        {
            "status": "firing",
            "labels": {
                "alertname": "TokenPulseTfServingDown",
                "severity": "critical",
                "instance": "tfs:8501",
            },
            "annotations": {
                "summary": "The model server cannot be scraped.",
                "runbook_url": "https://x/TokenPulseTfServingDown.md",
            },
        }  # fmt: skip
    ],
}


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    lines: list[str] = []
    settings = OncallSettings(port=0, file=tmp_path / "n.jsonl")
    server = serve(settings, lines.append)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", settings.file, lines
    finally:
        server.shutdown()
        server.server_close()


def _post(url: str, body: bytes) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_notification_is_appended_and_announced(receiver: tuple[str, Path, list[str]]) -> None:
    url, path, lines = receiver
    assert _post(f"{url}/pager", json.dumps(NOTE).encode()) == (
        200,
        {"status": "recorded", "alerts": 1},
    )
    (entry,) = [json.loads(x) for x in path.read_text().splitlines()]
    assert entry["receiver"] == "pager" and entry["alerts"] == NOTE["alerts"]
    assert lines == [
        "[FIRING] critical TokenPulseTfServingDown instance=tfs:8501 - The model server cannot be "
        "scraped. (https://x/TokenPulseTfServingDown.md) -> pager"
    ]
    with urllib.request.urlopen(f"{url}/notifications", timeout=5) as resp:
        assert [n["receiver"] for n in json.loads(resp.read())] == ["pager"]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"not json", "body is not JSON"),
        (b"[1]", "body must be a JSON object"),
        (b'{"alerts": 3}', "'alerts' must be a list of objects"),
        (b"[" * 100_000 + b"]" * 100_000, "body is not JSON"),  # past Python's recursion limit
    ],  # fmt: skip
)
def test_junk_is_refused_with_400(
    receiver: tuple[str, Path, list[str]], body: bytes, error: str
) -> None:
    url, path, lines = receiver
    assert _post(url, body) == (400, {"error": error})
    assert path.read_text() == "" and lines == []


def test_healthz_and_unknown_paths(receiver: tuple[str, Path, list[str]]) -> None:
    url, _, _ = receiver
    with urllib.request.urlopen(f"{url}/healthz", timeout=5) as resp:
        assert json.loads(resp.read()) == {"status": "ok"}
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(f"{url}/nope", timeout=5)
    assert exc.value.code == 404


def test_resolved_line_says_so() -> None:
    alert = {**NOTE["alerts"][0], "status": "resolved"}
    assert alert_line("chat", alert).startswith("[RESOLVED] critical TokenPulseTfServingDown")


def test_cli_rejects_a_bad_port_in_one_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "stack.cli", "oncall-receiver", "--port", "99999"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [out.stderr.strip()]
    assert "port" in out.stderr and "Traceback" not in out.stderr


def test_a_label_that_cannot_be_printed_still_gets_an_answer(
    receiver: tuple[str, Path, list[str]],
) -> None:
    """A lone surrogate once killed the handler after recording: no answer, so a resend."""
    url, path, lines = receiver
    body = json.dumps({"alerts": [{"labels": {"alertname": "\ud800"}}]}).encode()
    assert _post(url, body)[0] == 200
    assert "\\ud800" in lines[-1]
    lines[-1].encode("utf-8")  # printable
    assert len(path.read_text().splitlines()) == 1


def _serve(tmp_path: Path, **kw: object) -> tuple[ThreadingHTTPServer, int]:
    server = serve(OncallSettings(port=0, file=tmp_path / "n.jsonl", **kw), lambda _: None)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def test_idle_connections_are_closed_and_capped(tmp_path: Path) -> None:
    server, port = _serve(tmp_path, timeout_s=0.5, max_connections=4)
    try:
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        extra = socket.create_connection(("127.0.0.1", port))
        extra.settimeout(5)
        assert extra.recv(100).startswith(b"HTTP/1.1 503")  # over the cap: refused at once
        for s in idle:  # each silent connection is closed by the server after timeout_s
            s.settimeout(5)
            assert s.recv(1) == b""
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            assert resp.status == 200  # the slots came back
    finally:
        server.shutdown()
        server.server_close()


def test_the_notification_file_is_private(tmp_path: Path) -> None:
    import os
    import stat

    from monitoring.oncall.server import NotificationLog

    old = os.umask(0o022)
    try:
        log = NotificationLog(tmp_path / "run" / "oncall.jsonl", lambda _line: None)
        log.record("r", {"alerts": []})
    finally:
        os.umask(old)
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
