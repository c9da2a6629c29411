"""The receiver's own dead man's switch, through real receivers on loopback: a late Watchdog
pages once (recorded like a page Alertmanager sent, with its runbook), its return resolves the
page, the start-up grace pages nobody, and each arrival is relayed to a heartbeat URL."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from monitoring.oncall.deadman import ALERTNAME, DeadMansSwitch, Timing
from monitoring.oncall.server import OncallServer, OncallSettings, serve

DOG = json.dumps({"alerts": [{"labels": {"alertname": "Watchdog", "severity": "none"}}]}).encode()


class Running:
    """One receiver serving on a free loopback port."""

    def __init__(self, settings: OncallSettings) -> None:
        self.lines: list[str] = []
        self.settings = settings
        self.server: OncallServer = serve(settings, self.lines.append)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def watchdog(self) -> None:
        req = urllib.request.Request(f"{self.url}/watchdog", data=DOG, method="POST")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 200

    def own_pages(self) -> list[dict[str, Any]]:
        """The receiver's own page notifications in its file, in order."""
        entries = [json.loads(x) for x in self.settings.file.read_text().splitlines()]
        return [e for e in entries if e["alerts"][0]["labels"]["alertname"] == ALERTNAME]

    def metric(self, name: str) -> float | None:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        for line in text.splitlines():
            if line.startswith(f"{name} ") or line.startswith(f"{name}{{"):
                return float(line.rsplit(" ", 1)[1])
        return None


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    running: list[Running] = []

    def go(**overrides: Any) -> Running:
        settings = OncallSettings(port=0, file=tmp_path / "oncall.jsonl", **overrides)
        running.append(Running(settings))
        return running[-1]

    yield go
    for r in running:
        r.close()


def _wait(predicate: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# the Watchdog every 1 s, missing after 2 s of silence, no grace: a drill's pace
FAST = {"watchdog_interval": "1s", "watchdog_late_factor": 2.0, "watchdog_grace_s": 0.0}


def test_a_late_watchdog_pages_once_and_its_return_resolves_it(start: Any) -> None:
    r = start(**FAST)
    r.watchdog()
    arrived = time.monotonic()
    assert _wait(lambda: r.own_pages(), 5.0)
    late = time.monotonic() - arrived
    assert 2.0 <= late < 3.5  # late after 2 s, read every 0.25 s
    time.sleep(2.5)  # still silent: still one page, no repeat
    (fired,) = r.own_pages()
    assert fired["receiver"] == "pager" and fired["status"] == "firing"
    alert = fired["alerts"][0]
    assert alert["labels"] == {
        "alertname": ALERTNAME, "severity": "critical", "meta": "true", "team": "monitoring",
    }  # fmt: skip
    assert alert["annotations"]["runbook_url"] == f"http://127.0.0.1:9095/runbooks/{ALERTNAME}"
    assert fired["links"][0]["runbook"] == alert["annotations"]["runbook_url"]
    (line,) = r.lines  # the readable line run/logs/oncall.log shows
    assert line.startswith(f"[FIRING] critical {ALERTNAME} meta=true team=monitoring - The ")
    assert f"(http://127.0.0.1:9095/runbooks/{ALERTNAME}) -> pager" in line
    assert r.metric("tokenpulse_oncall_watchdog_missing") == 1.0
    assert r.metric("tokenpulse_oncall_watchdog_missing_pages_total") == 1.0
    r.watchdog()  # back
    fired_then_resolved = r.own_pages()
    assert [p["status"] for p in fired_then_resolved] == ["firing", "resolved"]
    resolved = fired_then_resolved[1]["alerts"][0]
    assert resolved["startsAt"] == alert["startsAt"] and resolved["endsAt"] > alert["startsAt"]
    assert r.lines[-1].startswith(f"[RESOLVED] critical {ALERTNAME}")
    assert r.metric("tokenpulse_oncall_watchdog_missing") == 0.0
    assert r.metric("tokenpulse_oncall_watchdog_received_total") == 2.0
    state = json.loads(urllib.request.urlopen(f"{r.url}/watchdog", timeout=5).read())
    assert state["missing"] is False and state["pages"] == 1 and state["count"] == 2


def test_arriving_on_time_never_pages(start: Any) -> None:
    r = start(**FAST)
    for _ in range(8):  # every 0.5 s for 4 s: twice the page's bound
        r.watchdog()
        time.sleep(0.5)
    assert r.own_pages() == [] and r.lines == []


def test_switched_off_it_never_pages(start: Any) -> None:
    r = start(**FAST, watchdog_switch=False)
    r.watchdog()
    time.sleep(3.0)
    assert r.own_pages() == [] and r.metric("tokenpulse_oncall_watchdog_missing") == 0.0


def test_no_page_during_the_start_up_grace(start: Any) -> None:
    # grace 3 s + 2 s late: nothing for 5 s without any Watchdog, then the page
    r = start(**{**FAST, "watchdog_grace_s": 3.0})
    began = time.monotonic()
    time.sleep(4.5)
    assert r.own_pages() == []
    assert _wait(lambda: r.own_pages(), 3.0)
    assert time.monotonic() - began >= 5.0


def test_a_restart_long_after_the_last_watchdog_waits_out_its_grace(start: Any) -> None:
    first = start(**FAST)
    first.watchdog()
    first.close()
    time.sleep(2.5)  # longer than the 2 s bound: the old arrival alone would page at once
    again = start(**{**FAST, "watchdog_grace_s": 2.0})
    time.sleep(1.5)
    assert again.own_pages() == []
    again.watchdog()  # Prometheus and Alertmanager are fine: it came
    time.sleep(1.5)
    assert again.own_pages() == []


def test_a_restart_mid_page_resolves_it_when_the_watchdog_returns(start: Any) -> None:
    first = start(**FAST)
    first.watchdog()
    assert _wait(lambda: first.own_pages(), 5.0)
    first.close()
    again = start(**{**FAST, "watchdog_grace_s": 60.0})
    again.watchdog()
    assert [p["status"] for p in again.own_pages()] == ["firing", "resolved"]


class _Heartbeats(BaseHTTPRequestHandler):
    """An external dead man's switch on loopback: records each ping's method, path and header."""

    seen: list[tuple[str, str, str]] = []

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.seen.append((self.command, self.path, self.headers.get("Authorization", "")))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *_: Any) -> None:
        pass


def test_each_watchdog_is_relayed_to_the_heartbeat_url(start: Any) -> None:
    _Heartbeats.seen = []
    hb = ThreadingHTTPServer(("127.0.0.1", 0), _Heartbeats)
    threading.Thread(target=hb.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{hb.server_address[1]}/v2/heartbeats/tokenpulse/ping"
        r = start(heartbeat_url=url, heartbeat_authorization="GenieKey k-123")
        r.watchdog()
        assert _wait(lambda: len(_Heartbeats.seen) == 1, 5.0)
        assert _Heartbeats.seen == [("POST", "/v2/heartbeats/tokenpulse/ping", "GenieKey k-123")]
        assert _wait(lambda: r.metric('tokenpulse_oncall_heartbeat_pings_total{result="ok"}'), 5)
    finally:
        hb.shutdown()
        hb.server_close()


def test_a_heartbeat_that_fails_is_counted_and_never_delays_the_answer(start: Any) -> None:
    # a heartbeat that takes the connection and never answers: a ping on the request's thread
    # would hold the Watchdog's answer for the ping's whole 10 s timeout
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)  # the kernel completes the handshake; nobody ever accepts or reads
        r = start(heartbeat_url=f"http://127.0.0.1:{hung.getsockname()[1]}/ping")
        began = time.monotonic()
        r.watchdog()
        assert time.monotonic() - began < 5.0  # half the ping's timeout
        failed = 'tokenpulse_oncall_heartbeat_pings_total{result="failed"}'
        assert _wait(lambda: r.metric(failed) == 1.0, 30.0)  # it timed out, and was counted
    assert r.metric('tokenpulse_oncall_heartbeat_pings_total{result="ok"}') == 0.0


def test_the_switch_pages_at_the_deadline_and_not_before() -> None:
    switch = DeadMansSwitch(Timing(60.0, 3.0, 120.0), started=1000.0)
    assert switch.deadline() == 1000.0 + 120.0 + 180.0
    assert switch.check(1299.0) is None
    fired = switch.check(1301.0)
    assert fired is not None and fired.status == "firing" and fired.silent_s == 301.0
    assert switch.check(1400.0) is None  # once
    back = switch.arrived(1450.0)
    assert back is not None and back.status == "resolved" and back.starts_at == 1301.0
    assert switch.deadline() == 1450.0 + 180.0


def test_the_first_arrival_ends_the_start_up_grace() -> None:
    # a restart 10 s after a Watchdog: the old arrival waits out the grace
    switch = DeadMansSwitch(Timing(5.0, 3.0, 120.0), started=1000.0, last=990.0)
    assert switch.deadline() == 1000.0 + 120.0 + 15.0
    # one arrives 20 s in: the path works, so 15 s of silence from then on pages
    assert switch.arrived(1020.0) is None
    assert switch.deadline() == 1035.0
    assert switch.check(1034.0) is None and switch.check(1036.0) is not None


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--watchdog-interval", "soon", "--watchdog-interval (env TOKENPULSE_ONCALL_WATCHDOG_"),
        ("--watchdog-interval", "0s", "the Watchdog interval must be positive"),
        ("--watchdog-late-factor", "1", "--watchdog-late-factor (env TOKENPULSE_ONCALL_WATCH"),
        ("--heartbeat-url", "hc-ping.com/secret-uuid", "must be an http(s) URL"),
    ],
)  # fmt: skip
def test_bad_settings_stop_the_start_in_one_line(flag: str, value: str, says: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "stack.cli", "oncall-receiver", "--port", "0", flag, value],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("tokenpulse oncall-receiver: error: ") and says in line
    assert "secret-uuid" not in line  # a heartbeat URL is a secret: never echoed
