"""The Watchdog path end to end on loopback: a real Alertmanager loaded with the generated local
config sends the Watchdog to a real receiver every interval; Alertmanager stopped, the receiver's
own dead man's switch pages within its bound; Alertmanager back, the page resolves."""

from __future__ import annotations

import contextlib
import datetime
import json
import shutil
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitoring.mixin import alertmanager
from monitoring.mixin.config import DEFAULT as mixin
from monitoring.oncall.deadman import ALERTNAME
from stack.launch import http_ok, running_process
from tokenpulse.procs import free_port

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus-alertmanager") is None, reason="needs prometheus-alertmanager"
)

INTERVAL_S = 4  # the Watchdog's route interval; the receiver pages after 3 of them
# How late a receiver held off the CPU may record its page: on a saturated 2-core machine a busy
# start of the suite held it back 1.9 s (at a 2 s interval the bound left 1.5 s, and a switch
# that waited a fourth interval passed it by 0.5 s at most; at 4 s it fails by 1 s at least)
SCHEDULING_SLACK_S = 2.5


@contextlib.contextmanager
def _receiver(tmp: Path) -> Iterator[tuple[str, Path]]:
    """The receiver as `up` runs it: a process in a session of its own (stack/launch.py), so that
    its switch keeps time as a stack's does (in the worker, a busy start of the suite held its
    page back 2 s); its URL and notification file."""
    port, log = free_port(), tmp / "oncall.jsonl"
    url = f"http://127.0.0.1:{port}"
    argv = [
        sys.executable, "-m", "stack.cli", "oncall-receiver", f"--port={port}", f"--file={log}",
        f"--watchdog-interval={INTERVAL_S}s", "--watchdog-late-factor=3", "--watchdog-grace-s=0",
    ]  # fmt: skip
    with running_process(argv, lambda: http_ok(f"{url}/healthz"), what="oncall-receiver"):
        yield url, log


@contextlib.contextmanager
def _alertmanager(tmp: Path, receiver_url: str, port: int) -> Iterator[str]:
    config = tmp / "alertmanager.yml"
    config.write_text(
        alertmanager.render_local(mixin,
            receiver_url, group_wait="1s", group_interval="1s",
            watchdog_interval=f"{INTERVAL_S}s",
        )
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    argv = [
        "prometheus-alertmanager", f"--config.file={config}", f"--storage.path={tmp / 'am'}",
        f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
        "--log.level=error",
    ]  # fmt: skip
    with running_process(argv, lambda: http_ok(f"{url}/-/ready"), what="alertmanager"):
        yield url


def _fire_watchdog(am_url: str) -> None:
    """Prometheus' part: the always-firing Watchdog, valid for a minute."""
    now = datetime.datetime.now(datetime.UTC)
    body = [
        {
            "labels": {"alertname": "Watchdog", "severity": "none"},
            "startsAt": now.isoformat(),
            "endsAt": (now + datetime.timedelta(minutes=1)).isoformat(),
        }
    ]
    req = urllib.request.Request(
        f"{am_url}/api/v2/alerts", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"}, method="POST",
    )  # fmt: skip
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


def _entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _arrivals(path: Path) -> list[float]:
    return [
        datetime.datetime.fromisoformat(e["received_at"]).timestamp()
        for e in _entries(path)
        if e["receiver"] == "watchdog"
    ]


def _pages(path: Path) -> list[tuple[str, float]]:
    return [
        (e["status"], datetime.datetime.fromisoformat(e["received_at"]).timestamp())
        for e in _entries(path)
        if e["alerts"][0]["labels"]["alertname"] == ALERTNAME
    ]


def test_alertmanager_stopped_pages_from_the_receiver_and_resolves(tmp_path: Path) -> None:
    port = free_port()
    with _receiver(tmp_path) as (receiver_url, log):
        with _alertmanager(tmp_path, receiver_url, port) as am_url:
            for _ in range(5 * INTERVAL_S):  # Prometheus re-sends the firing alert
                _fire_watchdog(am_url)
                time.sleep(1)
            # every interval, not every other one: the switch's bound counts intervals
            arrivals = _arrivals(log)
            gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
            assert len(arrivals) >= 4 and max(gaps) < 1.5 * INTERVAL_S, gaps
            assert _pages(log) == []
        # Alertmanager is gone: nothing arrives. Late after 3 intervals, read every quarter one
        late = 3 * INTERVAL_S
        bound = late + INTERVAL_S / 4 + SCHEDULING_SLACK_S
        deadline = time.monotonic() + bound + 5.0
        while not _pages(log) and time.monotonic() < deadline:
            time.sleep(0.1)
        ((status, at),) = _pages(log)
        assert status == "firing"
        # from the last Watchdog that came, which may be one after `arrivals` was read
        silent = at - _arrivals(log)[-1]
        assert late <= silent <= bound, silent  # neither early nor late
        with _alertmanager(tmp_path, receiver_url, port) as am_url:
            back = time.time()
            _fire_watchdog(am_url)
            deadline = time.monotonic() + 10.0
            while len(_pages(log)) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
        assert [s for s, _ in _pages(log)] == ["firing", "resolved"]
        # at the Watchdog's first arrival: Alertmanager's 1 s group wait, then the send
        assert _pages(log)[1][1] - back < 2.0 + SCHEDULING_SLACK_S
