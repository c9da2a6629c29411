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

from monitoring.oncall.server import NotificationLog, OncallSettings, alert_line, serve

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
    (line,) = lines
    assert line.startswith(
        "[FIRING] critical TokenPulseTfServingDown instance=tfs:8501 - The model server cannot be "
        "scraped. (https://x/TokenPulseTfServingDown.md) -> pager samples: http://127.0.0.1:9095/"
        "samples?since="
    )
    with urllib.request.urlopen(f"{url}/notifications", timeout=5) as resp:
        assert [n["receiver"] for n in json.loads(resp.read())] == ["pager"]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"not json", "body is not JSON"),
        (b"[1]", "body must be a JSON object"),
        (b'{"alerts": 3}', "alerts: input should be a valid list"),
        (b"[" * 100_000 + b"]" * 100_000, "body is not JSON"),  # past Python's recursion limit
        # issue 17 A6: written to the file, then the handler crashed and never answered
        (b'{"version":"4","alerts":[{"labels":5}]}', "alerts[0].labels: input should be a valid"),
        (b'{"alerts":[{"annotations":{}}]}', "alerts[0].labels: field required"),
        (b'{"alerts":[{"labels":{"a":1}}]}', "alerts[0].labels.a: input should be a valid string"),
        (b'{"alerts":[{"labels":{},"status":"on"}]}', "alerts[0].status: input should be"),
        (b'{"alerts":[{"labels":{}},{"labels":{},"annotations":[]}]}', "alerts[1].annotations:"),
        (b'{"alerts":[{"labels":{},"startsAt":0}]}', "alerts[0].startsAt: input should be"),
        (b'{"alerts":[],"commonLabels":{"x":null}}', "commonLabels.x: input should be"),
        (b'{"alerts":[],"externalURL":{}}', "externalURL: input should be a valid string"),
    ],  # fmt: skip
)
def test_junk_is_refused_with_400_naming_the_field(
    receiver: tuple[str, Path, list[str]], body: bytes, error: str
) -> None:
    url, path, lines = receiver
    status, answer = _post(url, body)
    assert status == 400 and answer["error"].startswith(error), answer
    assert path.read_text() == "" and lines == []  # nothing recorded, nothing announced
    with urllib.request.urlopen(f"{url}/healthz", timeout=5) as resp:
        assert resp.status == 200  # and the receiver still answers


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


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_watchdog_arrival_is_kept_and_not_announced(
    receiver: tuple[str, Path, list[str]],
) -> None:
    url, path, lines = receiver
    first = json.loads(_get(f"{url}/watchdog")[2])
    assert {k: first[k] for k in ("last_received_at", "age_s", "count", "missing")} == {
        "last_received_at": None, "age_s": None, "count": 0, "missing": False,
    }  # fmt: skip
    dog = {"alerts": [{"labels": {"alertname": "Watchdog", "severity": "none"}}]}
    for _ in range(2):
        assert _post(f"{url}/watchdog", json.dumps(dog).encode())[0] == 200
    state = json.loads(_get(f"{url}/watchdog")[2])
    assert state["count"] == 2 and 0 <= state["age_s"] < 5 and state["last_received_at"]
    assert lines == []  # a notification a minute would bury the pages
    assert len(path.read_text().splitlines()) == 2  # but the file keeps them
    _post(f"{url}/pager", json.dumps(NOTE).encode())
    assert json.loads(_get(f"{url}/watchdog")[2])["count"] == 2 and len(lines) == 1
    # a restarted receiver reads it back from its file
    restarted = NotificationLog(path, lines.append).watchdog_state()
    assert restarted["count"] == 2 and restarted["last_received_at"] == state["last_received_at"]


def test_runbooks_are_served_as_html(receiver: tuple[str, Path, list[str]]) -> None:
    url, _, _ = receiver
    status, kind, page = _get(f"{url}/runbooks/TokenPulseTfServingDown")
    assert (status, kind) == (200, "text/html; charset=utf-8")
    assert "<h1>TokenPulseTfServingDown</h1>" in page and "<h2>Mitigation</h2>" in page
    status, _, index = _get(f"{url}/runbooks/")
    assert status == 200 and 'href="/runbooks/TokenPulseTfServingDown"' in index
    for missing in ("TokenPulseNoSuchAlert", "..%2Fsecrets", "a.b"):
        assert _get(f"{url}/runbooks/{missing}")[0] == 404


def test_samples_page_gives_the_search_of_the_window(
    receiver: tuple[str, Path, list[str]],
) -> None:
    url, _, _ = receiver
    query = "model=gen&version=2&since=2026-01-01T10:00:00Z&until=2026-01-01T12:00:00Z&x=<b>"
    status, kind, page = _get(f"{url}/samples?{query}")
    assert status == 200 and kind.startswith("text/html")
    assert (
        "tokenpulse samples search --model gen --version 2 --since 2026-01-01T10:00:00Z "
        "--until 2026-01-01T12:00:00Z"
    ) in page
    assert "<b>" not in page


def test_recorded_notification_carries_each_alerts_links(tmp_path: Path) -> None:
    server, port = _serve(tmp_path, public_url="http://oncall.example:9095")
    try:
        alert = {
            **NOTE["alerts"][0],
            "labels": {**NOTE["alerts"][0]["labels"], "model": "gen", "version": "1"},
            "annotations": {
                **NOTE["alerts"][0]["annotations"],
                "dashboard_url": "http://grafana.example/d/tokenpulse-serving/?viewPanel=15",
            },
            "startsAt": "2026-01-01T11:00:00.123456789Z",
            "generatorURL": "http://prom.example/graph?g0.expr=up",
        }
        doc = {**NOTE, "alerts": [alert], "externalURL": "http://am.example"}
        _post(f"http://127.0.0.1:{port}/pager", json.dumps(doc).encode())
        (entry,) = json.loads(_get(f"http://127.0.0.1:{port}/notifications")[2])
    finally:
        server.shutdown()
        server.server_close()
    (links,) = entry["links"]
    assert alert_line("pager", alert, links).endswith(
        f"-> pager dashboard: {links['dashboard']} samples: {links['samples']}"
    )
    start_ms = 1767265200123  # 2026-01-01T11:00:00.123Z
    assert links == {
        "runbook": "https://x/TokenPulseTfServingDown.md",
        "dashboard": "http://grafana.example/d/tokenpulse-serving/?viewPanel=15"
        f"&from={start_ms - 3_600_000}&to={start_ms + 3_600_000}",
        "samples": "http://oncall.example:9095/samples?model=gen&version=1"
        "&since=2026-01-01T10%3A00%3A00Z&until=2026-01-01T12%3A00%3A00Z",
        "source": "http://prom.example/graph?g0.expr=up",
        "alertmanager": "http://am.example",
    }
