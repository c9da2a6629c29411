"""Replica drill: two model servers behind the gateway, one killed under steady traffic.

The test stack (devtools/stack.py) with `model_server_replicas=2` and alerting, on the
time-compressed rules: the gateway routes around the dead replica, exactly one page arrives and
it names that replica, and it resolves once the replica is back (and back in rotation).

What is guaranteed: the traffic is sequential (one request in flight at a time), and a connection
failure before any answer is retried once on the other replica, so at most the one request in
flight at the kill may fail, and every later one succeeds.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from devtools.stack import running_stack, wait_until
from tests.support.binaries import needs_prometheus

pytestmark = [pytest.mark.slow, needs_prometheus]

KILLED = 1


def _alerts(notes: list[dict], status: str) -> list[tuple[str, dict]]:
    """(receiver, alert) of every notification but the Watchdog's (it always fires)."""
    return [
        (n["receiver"], a)
        for n in notes
        if n["receiver"] != "watchdog"
        for a in n["alerts"]
        if a["status"] == status
    ]


def test_a_killed_replica_is_routed_around_and_pages_once_naming_it(
    tiny_export: Path, tmp_path: Path
) -> None:
    options = {"alerting": True, "model_server_replicas": 2}
    with running_stack(tiny_export, tmp_path / "stack", **options) as stack:
        served = 'tokenpulse_gateway_upstream_requests_total{{outcome="success",replica="{}"}} > 0'
        with stack.traffic(rps=2.0) as codes:
            for replica in (0, 1):  # both replicas serve
                stack.wait_for_series(served.format(replica), timeout_s=60)
            time.sleep(3)
            at_kill = len(codes)
            stack.stop_modelserver(KILLED)
            page = wait_until(lambda: _alerts(stack.notifications(), "firing"), 120, "the page")
            after_kill = len(codes)
            stack.start_modelserver(KILLED)
            wait_until(lambda: _alerts(stack.notifications(), "resolved"), 120, "resolved")
            back = f'tokenpulse_gateway_upstream_healthy{{replica="{KILLED}"}} == 1'
            stack.wait_for_series(back, timeout_s=30)
            time.sleep(5)  # nothing else arrives after the resolution
        notes = stack.notifications()
        failed_after_kill = [c for c in codes[at_kill + 1 :] if c != 200]
        print(
            f"\nreplica drill: {len(codes)} requests, {after_kill - at_kill} while replica "
            f"{KILLED} was down until its page; non-200 overall: {[c for c in codes if c != 200]}"
        )
        assert after_kill - at_kill >= 5, "traffic kept flowing while the replica was down"
        assert failed_after_kill == []
        assert [c for c in codes[:at_kill] if c != 200] == []
        (fired,) = _alerts(notes, "firing")
        (resolved,) = _alerts(notes, "resolved")
        assert page == [fired]
        receiver, alert = fired
        assert receiver == "pager"
        assert alert["labels"]["alertname"] == "TokenPulseTfServingDown"
        assert alert["labels"]["replica"] == str(KILLED)
        port = stack.config.modelserver_ports(KILLED)[0]
        assert alert["labels"]["instance"] == f"127.0.0.1:{port}"
        assert (
            f"Replica {KILLED} is out of the gateway's rotation"
            in (alert["annotations"]["description"])
        )
        assert resolved[1]["labels"]["replica"] == str(KILLED)
