"""`up --ha`'s Alertmanager pair, for real: the component table's two Alertmanager rows (real
Alertmanager 0.25, gossiping on loopback) and the on-call receiver, no Prometheus, no model.

Both Prometheus of an HA stack send every alert to both Alertmanagers. The test sends one alert to
both, as they would (the Prometheus replica label already dropped), and counts what the on-call
receiver gets: one notification from the cluster; two from two Alertmanagers that do not gossip,
which is what the pair would be without the cluster flags. And why `up --ha` refuses a group
interval not longer than a scrape plus an evaluation: a recovery the two Prometheus see apart
pages twice when groups flush in between.
"""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stack import components
from stack.config import HaPorts, Ports, StackConfig
from stack.supervise import Supervisor
from tests.support.binaries import needs_prometheus
from tokenpulse.procs import free_port

pytestmark = needs_prometheus

# short gossip and peer timeout: the second peer waits this long for the first's notification to
# arrive in its notification log before it sends itself
CLUSTER_FLAGS = ("--cluster.peer-timeout=2s", "--cluster.gossip-interval=50ms",
                 "--cluster.pushpull-interval=2s", "--cluster.probe-interval=200ms")  # fmt: skip
ALERT = {"alertname": "TokenPulseTfServingDown", "severity": "critical", "job": "tfserving",
         "instance": "127.0.0.1:8501"}  # fmt: skip


def _config(tmp_path: Path, cluster: bool) -> StackConfig:
    ports = Ports(**{name: free_port() for name in Ports.names()})
    ha = HaPorts(**{name: free_port() for name in HaPorts.names()})
    flags = CLUSTER_FLAGS if cluster else ()
    return StackConfig(
        run_dir=tmp_path, ports=ports, ha=ha, group_wait="1s", group_interval="5s",
        repeat_interval="1h", extra_flags={"alertmanager": flags}, start_timeout_s=60,
    )  # fmt: skip


def _post(config: StackConfig, port_field: str, ends_in_s: float = 300.0) -> None:
    ends = (datetime.now(UTC) + timedelta(seconds=ends_in_s)).isoformat()
    body = json.dumps([{"labels": ALERT, "annotations": {"summary": "down"}, "endsAt": ends}])
    req = urllib.request.Request(
        config.url(port_field, "/api/v2/alerts"), data=body.encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 200


def _pages(config: StackConfig, status: str = "firing") -> list[dict]:
    path = config.path("oncall.jsonl")
    notes = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [n for n in notes if any(a["labels"]["alertname"] == ALERT["alertname"]
                                    and a["status"] == status for a in n["alerts"])]  # fmt: skip


def _wait(what: str, predicate, timeout_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _peers(config: StackConfig, port_field: str) -> int:
    with urllib.request.urlopen(config.url(port_field, "/api/v2/status"), timeout=5) as resp:
        return len(json.loads(resp.read())["cluster"].get("peers") or [])


@pytest.mark.parametrize(("cluster", "wanted"), [(True, 1), (False, 2)])
def test_both_alertmanagers_get_the_alert_and_on_call_gets_it_once_per_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cluster: bool, wanted: int
) -> None:
    config = _config(tmp_path, cluster)
    (tmp_path / "logs").mkdir()
    if not cluster:  # the pair as it would be with the cluster flags left out: no gossip
        alone = ["--cluster.listen-address="]
        monkeypatch.setattr(components, "_cluster_flags", lambda c, i: alone)
    rows = [components.alertmanager(i) for i in (0, 1)]
    stack = Supervisor(config, components=(components.by_name("oncall"), *rows))
    try:
        stack.start_all()
        if cluster:  # the pair has found each other before the alert arrives
            deadline = time.monotonic() + 30
            while min(_peers(config, f) for f in components.ALERTMANAGER_PORTS) < 2:
                assert time.monotonic() < deadline, "the Alertmanagers never formed a cluster"
                time.sleep(0.2)
        for port_field in components.ALERTMANAGER_PORTS:
            _post(config, port_field)  # as each Prometheus of the pair does
        deadline = time.monotonic() + 30
        while not _pages(config):
            assert time.monotonic() < deadline, "no notification arrived"
            time.sleep(0.2)
        # group_wait (1s), the second peer's wait (peer timeout 2s) and gossip: both have sent,
        # or decided not to, well within 8 s
        time.sleep(8)
        pages = _pages(config)
    finally:
        stack.stop_all()
    assert len(pages) == wanted, pages
    assert all(p["receiver"] == "pager" and len(p["alerts"]) == 1 for p in pages)


@pytest.mark.parametrize(("group_interval", "pages"), [("1s", 2), ("4s", 1)])
def test_a_recovery_seen_apart_pages_twice_unless_groups_flush_farther_apart(
    tmp_path: Path, group_interval: str, pages: int
) -> None:
    """Why `up --ha` wants group_interval > scrape + evaluation: one Prometheus sees the recovery
    and sends the alert resolved; the other, a scrape and an evaluation behind (here 3 s), sends
    it firing once more, then resolved. Alertmanager takes the newest copy, so a group flushed in
    between notifies resolved, then firing again: a second page. Real Alertmanager 0.25."""
    config = _config(tmp_path, cluster=False)
    config = dataclasses.replace(config, ha=None, group_interval=group_interval)
    (tmp_path / "logs").mkdir()
    rows = (components.by_name("oncall"), components.alertmanager(0))
    stack = Supervisor(config, components=rows)
    try:
        stack.start_all()
        _post(config, "alertmanager_port")  # both Prometheus: firing
        _wait("the page", lambda: _pages(config))
        _post(config, "alertmanager_port", ends_in_s=0)  # the first sees the recovery
        time.sleep(1.5)
        _post(config, "alertmanager_port")  # the second, a scrape behind: still firing
        time.sleep(1.5)
        _post(config, "alertmanager_port", ends_in_s=0)  # and now resolved too
        _wait("the resolution", lambda: _pages(config, "resolved"))
        time.sleep(2 * float(group_interval.removesuffix("s")) + 1)
        fired = _pages(config)
    finally:
        stack.stop_all()
    assert len(fired) == pages, fired
