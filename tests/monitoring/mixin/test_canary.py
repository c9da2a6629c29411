"""The live canary-vs-stable comparison: its timing bound, its route, and its inhibitions in a
real Alertmanager (the promtool side is alerts/tests/canary.test.yml)."""

from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator

import pytest

from monitoring.mixin.alerts import canary
from monitoring.mixin.config import DEFAULT as c
from monitoring.mixin.promql import seconds
from tests.monitoring.mixin.test_inhibitions import _alertmanager
from tokenpulse.paths import ROOT

P = c.alert_prefix
DEGRADED = {
    "alertname": f"{P}CanaryDegradedVsStable", "severity": "warning", "signal": "empty_output",
    "model": "gen", "version": "2", "version_label": "canary", "stable_version": "1",
}  # fmt: skip
DOWN = {"alertname": f"{P}TfServingDown", "severity": "critical", "job": "tfserving"}
RECENTLY = {"alertname": f"{P}TfServingRecentlyDown", "severity": "info", "job": "tfserving"}
FLEET = {"alertname": f"{P}TfServingFleetRecentlyDown", "severity": "info"}
FLEET_UNAVAILABLE = {
    "alertname": f"{P}TfServingFleetRecentlyUnavailable", "severity": "info", "model": "gen",
}  # fmt: skip
SETTLE_S = 1.0


def _fire_after_s(total_rps: float, weight: float) -> float:
    """Seconds from a broken canary's first output to its chat message, at the worst alignment:
    enough outputs for the guard (one scrape is lost to a series born with its first output),
    the `for`, a scrape and an evaluation late, then Alertmanager's group_wait."""
    canary_rps = total_rps * weight
    guard = c.canary_live_min_outputs / canary_rps + seconds(c.scrape_interval)
    lag = seconds(c.scrape_interval) + seconds(c.evaluation_interval)
    return guard + seconds(c.canary_live_for) + lag + seconds(c.am_group_wait)


def test_a_broken_canary_at_5_percent_of_1_rps_reaches_chat_within_15_minutes() -> None:
    assert _fire_after_s(1.0, 0.05) <= 15 * 60
    # ... and the window can hold the guard's outputs at that rate at all
    assert 0.05 * seconds(c.canary_live_window) >= c.canary_live_min_outputs


def test_too_little_canary_traffic_never_fills_the_guard() -> None:
    # 5% of 0.2 req/s: 9 outputs in any window, never the guard's 30
    assert 0.01 * seconds(c.canary_live_window) < c.canary_live_min_outputs


def test_one_alert_per_signal_each_a_windowed_symptom_of_the_fleet() -> None:
    alerts = canary.live_alerts(c)
    assert [a.labels["signal"] for a in alerts] == list(c.canary_live_margins)
    for a in alerts:
        assert c.alertname(a.name) == DEGRADED["alertname"]
        assert (a.symptom, a.windowed, a.per_replica) == (True, True, False)
        assert a.severity == c.canary_live_severity


@pytest.mark.skipif(shutil.which("amtool") is None, reason="amtool not installed")
@pytest.mark.parametrize("name", ["alertmanager.yml", "alertmanager.local.yml"])
def test_it_reaches_chat(name: str) -> None:
    path = ROOT / "monitoring" / "alertmanager" / name
    labels = [f"{k}={v}" for k, v in DEGRADED.items()]
    out = subprocess.run(
        ["amtool", "config", "routes", "test", f"--config.file={path}", *labels],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (out.returncode, out.stdout.strip()) == (0, "chat"), out.stderr


@pytest.fixture(scope="module")
def am_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("prometheus-alertmanager") is None:
        pytest.skip("needs prometheus-alertmanager")
    with _alertmanager(tmp_path_factory.mktemp("am")) as url:  # the inhibition tests' own
        yield url


def _post(am_url: str, alerts: list[dict[str, str]], ends_in_s: float) -> None:
    now = datetime.datetime.now(datetime.UTC)
    body = [
        {
            "labels": a,
            "startsAt": (now - datetime.timedelta(minutes=1)).isoformat(),
            "endsAt": (now + datetime.timedelta(seconds=ends_in_s)).isoformat(),
        }
        for a in alerts
    ]
    post = urllib.request.Request(
        f"{am_url}/api/v2/alerts", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"}, method="POST",
    )  # fmt: skip
    with urllib.request.urlopen(post, timeout=10) as resp:
        assert resp.status == 200


_CASES = iter(range(10_000))


def _held(am_url: str, cause: dict[str, str], target: dict[str, str], want: bool) -> bool:
    """Post `cause` and `target` firing; whether Alertmanager suppresses `target` (read once it
    shows `want`, or after SETTLE_S more); then resolve both so no case feeds the next."""
    case = f"canary{next(_CASES)}"
    alerts = [{**cause, "case": case}, {**target, "case": case}]
    _post(am_url, alerts, 600)
    time.sleep(SETTLE_S)  # the inhibitor learns of new sources asynchronously
    deadline = time.monotonic() + SETTLE_S
    try:
        while True:
            query = f"{am_url}/api/v2/alerts?filter=case%3D%22{case}%22"
            with urllib.request.urlopen(query, timeout=10) as resp:
                doc = json.load(resp)
            held = any(
                a["labels"]["alertname"] == target["alertname"]
                and a["status"]["state"] == "suppressed"
                for a in doc
            )
            if held == want or time.monotonic() > deadline:
                return held
            time.sleep(0.1)
    finally:
        _post(am_url, alerts, -1)


@pytest.mark.parametrize(
    ("cause", "held"),
    [
        # the only model server down now (no replica label): its failed requests explain it
        (DOWN, True),
        # the whole fleet was paged down within the recovery window: still in the 15m window
        (FLEET, True),
        # gen had no AVAILABLE version on any replica within the recovery window
        (FLEET_UNAVAILABLE, True),
        # ... another model's outage explains nothing about gen's canary
        ({**FLEET_UNAVAILABLE, "model": "chat"}, False),
        # one replica of several recently down: the fleet's canary outputs are its own
        ({**RECENTLY, "replica": "1"}, False),
    ],
    ids=["down-now", "fleet-recently-down", "fleet-unavailable", "other-model", "one-replica"],
)
def test_inhibited_like_the_other_windowed_symptoms(
    am_url: str, cause: dict[str, str], held: bool
) -> None:
    assert _held(am_url, cause, DEGRADED, want=held) is held
