"""The generated inhibit rules, run by the real Alertmanager: what a cause silences, and what not.

promtool cannot test inhibition, so each case posts firing alerts (labelled as the rules label
them) to a real `prometheus-alertmanager` loaded with the generated local config and reads back
which ones it suppresses. The receivers point nowhere: only the inhibitor's verdict is read.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import shutil
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitoring.mixin import alertmanager
from monitoring.mixin.config import DEFAULT as mixin
from stack.launch import http_ok, running_process
from tokenpulse.procs import free_port

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus-alertmanager") is None, reason="needs prometheus-alertmanager"
)

P = "TokenPulse"
DOWN = {"alertname": f"{P}TfServingDown", "severity": "critical", "job": "tfserving"}
RECENTLY = {"alertname": f"{P}TfServingRecentlyDown", "severity": "info", "job": "tfserving"}
FLEET = {"alertname": f"{P}TfServingFleetRecentlyDown", "severity": "info"}
NO_VERSION = {
    "alertname": f"{P}TfServingNoAvailableVersion", "severity": "critical",
    "job": "tokenpulse-exporter", "model": "gen",
}  # fmt: skip
UNAVAILABLE = {"alertname": f"{P}TfServingRecentlyUnavailable", "severity": "info", "model": "gen"}
FLEET_UNAVAILABLE = {
    "alertname": f"{P}TfServingFleetRecentlyUnavailable", "severity": "info", "model": "gen",
}  # fmt: skip
BURN = {
    "alertname": f"{P}GatewayAvailabilityBudgetBurn", "severity": "critical", "model": "gen",
    "slo": "availability", "long_window": "1h",
}  # fmt: skip
MISMATCH = {
    "alertname": f"{P}CanaryMismatch", "severity": "warning", "job": "tokenpulse-exporter",
    "model": "gen", "version": "2",
}  # fmt: skip
FLAPPING = {"alertname": f"{P}TfServingFlapping", "severity": "critical", "job": "tfserving"}
GPU_FULL = {"alertname": f"{P}GpuMemoryNearlyFull", "severity": "warning", "gpu": "0"}
# one of three gateway pods down (the Kubernetes shape: a target per pod) and the fleet's burn
GATEWAY_DOWN = {
    "alertname": f"{P}GatewayDown", "severity": "critical", "job": "gateway",
    "instance": "10.0.0.7:8080",
}  # fmt: skip
GATEWAY_FLEET_DOWN = {"alertname": f"{P}GatewayFleetDown", "severity": "info"}
BREAKER = {
    "alertname": f"{P}GatewayCircuitBreakerOpen", "severity": "warning", "job": "gateway",
    "instance": "10.0.0.7:8080",
}  # fmt: skip
LATENCY_BURN = {
    "alertname": f"{P}GatewayLatencyBudgetBurn", "severity": "critical", "model": "gen",
    "slo": "latency", "long_window": "1h",
}  # fmt: skip
EXHAUSTED = {"alertname": f"{P}TfServingResourceExhausted", "severity": "warning"}


@contextlib.contextmanager
def _alertmanager(tmp: Path) -> Iterator[str]:
    config = tmp / "alertmanager.yml"
    config.write_text(alertmanager.render_local(mixin, "http://127.0.0.1:9/"))
    url = f"http://127.0.0.1:{free_port()}"
    argv = [
        "prometheus-alertmanager", f"--config.file={config}", f"--storage.path={tmp}",
        f"--web.listen-address={url.removeprefix('http://')}", "--cluster.listen-address=",
        "--log.level=error",
    ]  # fmt: skip
    with running_process(argv, lambda: http_ok(f"{url}/-/ready"), what="alertmanager"):
        yield url


@pytest.fixture(scope="module")
def am_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _alertmanager(tmp_path_factory.mktemp("am")) as url:
        yield url


def _post(am_url: str, alerts: list[dict[str, str]], ends_in_s: float) -> None:
    now = datetime.datetime.now(datetime.UTC)
    start = now - datetime.timedelta(minutes=1)  # before endsAt, also when resolving
    body = [
        {
            "labels": a,
            "startsAt": start.isoformat(),
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


def _suppressed(am_url: str, *alerts: dict[str, str], want: set[str]) -> set[str]:
    """Post `alerts` as firing; the names Alertmanager suppresses, once it shows `want` or after
    SETTLE_S. Then resolve them, so that no alert of one case is a source for the next (a
    `case` label tells the cases apart)."""
    case = f"c{next(_CASES)}"
    labelled = [{**a, "case": case} for a in alerts]
    _post(am_url, labelled, 600)
    # the inhibitor learns of new source alerts asynchronously: read only after it has had time
    time.sleep(SETTLE_S)
    deadline = time.monotonic() + SETTLE_S
    try:
        while True:
            query = f"{am_url}/api/v2/alerts?filter=case%3D%22{case}%22"
            with urllib.request.urlopen(query, timeout=10) as resp:
                doc = json.load(resp)
            assert len(doc) == len(alerts)
            got = {a["labels"]["alertname"] for a in doc if a["status"]["state"] == "suppressed"}
            if got == want or time.monotonic() > deadline:
                return got
            time.sleep(0.1)
    finally:
        _post(am_url, labelled, -1)


SETTLE_S = 1.0
_CASES = iter(range(10_000))


def test_every_inhibition_is_scoped_or_says_why_not() -> None:
    rules = alertmanager.inhibit_rules(mixin)
    unscoped = [r for r in rules if not r.get("equal")]
    # only the whole gateway fleet down explains every model's gateway symptoms: it has no
    # narrower scope (and no labels); one pod down is scoped to its own instance
    assert [r["source_matchers"] for r in unscoped] == [[f'alertname="{P}GatewayFleetDown"']]


def test_one_gateway_pod_down_hides_nothing_of_the_fleet(am_url: str) -> None:
    # two pods still serve: a burn measured on them is theirs, not the dead pod's
    assert _suppressed(am_url, GATEWAY_DOWN, BURN, LATENCY_BURN, want=set()) == set()
    other_pod = {**BREAKER, "instance": "10.0.0.8:8080"}
    assert _suppressed(am_url, GATEWAY_DOWN, other_pod, want=set()) == set()


def test_one_gateway_pod_down_hides_its_own_windowed_alerts(am_url: str) -> None:
    breaker = {BREAKER["alertname"]}
    assert _suppressed(am_url, GATEWAY_DOWN, BREAKER, want=breaker) == breaker


def test_the_whole_gateway_fleet_down_hides_the_fleet_burn(am_url: str) -> None:
    burns = {BURN["alertname"], LATENCY_BURN["alertname"]}
    assert _suppressed(am_url, GATEWAY_FLEET_DOWN, BURN, LATENCY_BURN, want=burns) == burns


@pytest.mark.parametrize("source", ["RecentlyDown", "RecentlyUnavailable"])
def test_state_alerts_are_never_targets_of_the_recovery_window(source: str) -> None:
    rules = alertmanager.inhibit_rules(mixin)
    (recovery,) = [r for r in rules if source in str(r["source_matchers"])]
    targets = recovery["target_matchers"][0]
    for state in ("NoAvailableVersion", "VersionLoadFailed", "Flapping", "GpuMemoryNearlyFull"):
        assert state not in targets
    assert f"{P}GatewayAvailabilityBudgetBurn" in targets and f"{P}QualityEmptyOutputs" in targets


def test_bad_restart_pages_no_available_version_during_the_recovery_window(am_url: str) -> None:
    # TF Serving back (TfServingDown resolved) with no AVAILABLE version
    assert _suppressed(am_url, RECENTLY, NO_VERSION, want=set()) == set()


def test_recovery_window_silences_what_still_holds_the_outage(am_url: str) -> None:
    # the burn's windows and the canary's last run still hold the outage: silenced
    held = {BURN["alertname"], MISMATCH["alertname"]}
    assert _suppressed(am_url, RECENTLY, BURN, MISMATCH, want=held) == held


def test_a_crash_loop_page_explains_the_burn_of_its_replica_only(am_url: str) -> None:
    # one page per incident: the loop's page stands for its outages and the burn they cause
    burn = {BURN["alertname"]}
    assert _suppressed(am_url, FLAPPING, BURN, want=burn) == burn
    # one replica of several looping: the fleet's burn (no replica label) is not its alone
    assert _suppressed(am_url, {**FLAPPING, "replica": "1"}, BURN, want=set()) == set()


def test_down_now_silences_state_symptoms_of_its_replica_only(am_url: str) -> None:
    down, mismatch = {**DOWN, "replica": "1"}, {MISMATCH["alertname"]}
    assert _suppressed(am_url, down, {**MISMATCH, "replica": "1"}, want=mismatch) == mismatch
    assert _suppressed(am_url, down, {**MISMATCH, "replica": "0"}, want=set()) == set()


def test_one_replica_recently_down_does_not_hide_the_fleet_burn(am_url: str) -> None:
    assert _suppressed(am_url, {**RECENTLY, "replica": "1"}, BURN, want=set()) == set()


def test_the_whole_fleet_recently_down_hides_the_fleet_burn(am_url: str) -> None:
    burn = {BURN["alertname"]}
    assert _suppressed(am_url, FLEET, BURN, want=burn) == burn


def test_gpu_memory_exhaustion_explains_resource_exhausted_on_its_machine(am_url: str) -> None:
    # a node's GPU (the DaemonSet exporter's: no replica) and a TF Serving pod on that node
    full, exhausted = {**GPU_FULL, "node": "a"}, {EXHAUSTED["alertname"]}
    on_a = {**EXHAUSTED, "node": "a", "replica": "tfs-0"}
    assert _suppressed(am_url, full, on_a, want=exhausted) == exhausted
    on_b = {**EXHAUSTED, "node": "b", "replica": "tfs-1"}
    assert _suppressed(am_url, full, on_b, want=set()) == set()
    # one machine (local, compose): no node label on either, whichever replica
    local = {**GPU_FULL, "replica": "0"}
    assert _suppressed(am_url, local, {**EXHAUSTED, "replica": "1"}, want=exhausted) == exhausted


def test_after_a_no_available_version_page_its_burn_stays_silenced(am_url: str) -> None:
    # NoAvailableVersion resolved (not posted); the burn's windows still hold its 503s. The page
    # was sent, so "recently unavailable" fires: one incident, one page
    held = {BURN["alertname"], MISMATCH["alertname"]}
    assert _suppressed(am_url, UNAVAILABLE, BURN, MISMATCH, want=held) == held


def test_recently_unavailable_holds_only_windowed_symptoms_of_its_model(am_url: str) -> None:
    # a second model with no AVAILABLE version, a restart, a crash loop: state alerts page
    # (each apart: a TfServingDown firing silences NoAvailableVersion itself)
    for state in ({**NO_VERSION, "model": "chat"}, NO_VERSION, DOWN, FLAPPING):
        assert _suppressed(am_url, UNAVAILABLE, state, want=set()) == set()
    other = {**BURN, "model": "chat"}
    assert _suppressed(am_url, UNAVAILABLE, other, want=set()) == set()


def test_one_replica_recently_unavailable_does_not_hide_the_fleet_burn(am_url: str) -> None:
    assert _suppressed(am_url, {**UNAVAILABLE, "replica": "1"}, BURN, want=set()) == set()


def test_gen_gone_from_every_replica_holds_the_fleet_burn_of_gen_only(am_url: str) -> None:
    burn = {BURN["alertname"]}
    assert _suppressed(am_url, FLEET_UNAVAILABLE, BURN, want=burn) == burn
    other = {**BURN, "model": "chat"}
    assert _suppressed(am_url, FLEET_UNAVAILABLE, other, want=set()) == set()
    # a replica's own state alert pages (here: gen gone again from replica 0)
    again = {**NO_VERSION, "replica": "0"}
    assert _suppressed(am_url, FLEET_UNAVAILABLE, again, want=set()) == set()
