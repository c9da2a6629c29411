"""The watchdog-silent drill's own checks, against a real on-call receiver on loopback: it refuses
a receiver whose switch is off, and judges the page's delay against the switch's own bound."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from monitoring.oncall.deadman import ALERTNAME
from monitoring.oncall.server import OncallSettings, serve
from stack.config import Ports, StackConfig
from stack.drill.meta import SWITCH_SLACK_S, WatchdogSilent
from stack.drill.scenario import Log
from stack.drill.target import DrillError, Target
from stack.up.state import StackState, write_state


@pytest.fixture
def receiver_port(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[int]:
    switch = getattr(request, "param", True)
    settings = OncallSettings(
        port=0, file=tmp_path / "receiver.jsonl", watchdog_interval="5s", watchdog_switch=switch
    )
    server = serve(settings, lambda _: None)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _target(run_dir: Path, oncall_port: int) -> Target:
    ports = Ports(oncall_port=oncall_port)
    config = StackConfig(run_dir=run_dir, ports=ports, rules="compressed", restart_delay_s=20)
    write_state(StackState(config, os.getpid(), {}))
    (run_dir / "demo-key.txt").write_text("key\n")
    return Target(run_dir)


@pytest.mark.parametrize("receiver_port", [False], indirect=True)
def test_a_receiver_with_its_switch_off_is_refused(tmp_path: Path, receiver_port: int) -> None:
    target = _target(tmp_path, receiver_port)
    with pytest.raises(DrillError, match="dead man's switch is off"):
        WatchdogSilent()._switch(target)


def test_the_switch_bound_is_read_from_the_receiver(tmp_path: Path, receiver_port: int) -> None:
    doc = WatchdogSilent()._switch(_target(tmp_path, receiver_port))
    assert doc["switch"] is True and doc["late_after_s"] == 15.0  # 3 x 5 s


def _note(receiver: str, alertname: str, at: float) -> str:
    iso = datetime.fromtimestamp(at, UTC).isoformat()
    alert = {"status": "firing", "labels": {"alertname": alertname}}
    return json.dumps({"received_at": iso, "receiver": receiver, "alerts": [alert]}) + "\n"


@pytest.mark.parametrize(("delay", "late"), [(16.0, False), (15.0 + SWITCH_SLACK_S + 3, True)])
def test_a_page_past_the_switch_bound_is_a_problem(
    tmp_path: Path, receiver_port: int, delay: float, late: bool
) -> None:
    target = _target(tmp_path, receiver_port)
    last = 1_800_000_000.0
    (tmp_path / "oncall.jsonl").write_text(
        _note("watchdog", "Watchdog", last) + _note("pager", ALERTNAME, last + delay)
    )
    scenario, log = WatchdogSilent(), Log()
    scenario._late_after = 15.0
    scenario.check(target, log)
    assert log.timings["silent_before_page_s"] == delay
    assert bool(log.problems) is late
