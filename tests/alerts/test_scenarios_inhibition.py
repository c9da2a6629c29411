"""The scenario table's outcomes in Alertmanager: which firing alerts reach a person, and where.

Each case is a row of `alerts/README.md` ("Scenarios"): the alerts that row's promtool test
(`alerts/tests/scenarios_*.test.yml`) shows firing together, labelled as the rules label them,
posted to a real `prometheus-alertmanager` loaded with the generated config; the expectation
comes from the taxonomy (one page per incident), not from today's inhibit rules. Routes are read
with `amtool config routes test` on the generated production config.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest

from tests.monitoring.mixin.test_inhibitions import _alertmanager, _suppressed
from tokenpulse.paths import ROOT

AM_CONFIG = ROOT / "monitoring" / "alertmanager" / "alertmanager.yml"

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus-alertmanager") is None or shutil.which("amtool") is None,
    reason="needs prometheus-alertmanager and amtool",
)

P = "TokenPulse"
TFS0 = {"job": "tfserving", "instance": "tfserving-0:8501", "replica": "0"}
TFS1 = {"job": "tfserving", "instance": "tfserving-1:8503", "replica": "1"}
DOWN0 = {"alertname": f"{P}TfServingDown", "severity": "critical", **TFS0}
DOWN1 = {"alertname": f"{P}TfServingDown", "severity": "critical", **TFS1}
RECENTLY1 = {"alertname": f"{P}TfServingRecentlyDown", "severity": "info", **TFS1}
FLEET = {"alertname": f"{P}TfServingFleetRecentlyDown", "severity": "info"}
FLAP0 = {"alertname": f"{P}TfServingFlapping", "severity": "critical", **TFS0}
# the restarts rows run one model server: the local stack labels no replica then (absent equals
# absent in an inhibition's `equal`)
TFS = {"job": "tfserving", "instance": "tfserving:8501"}
FLAP = {"alertname": f"{P}TfServingFlapping", "severity": "critical", **TFS}
RECENTLY = {"alertname": f"{P}TfServingRecentlyDown", "severity": "info", **TFS}
BURN = {
    "alertname": f"{P}GatewayAvailabilityBudgetBurn", "severity": "critical", "model": "gen",
    "slo": "availability", "long_window": "1h",
}  # fmt: skip
GW1_DOWN = {
    "alertname": f"{P}GatewayDown", "severity": "critical", "job": "tokenpulse-gateway",
    "instance": "gw-1:8080",
}  # fmt: skip
EX0 = {"job": "tokenpulse-exporter", "instance": "exporter:9410", "replica": "0"}
GPU_FULL = {
    "alertname": f"{P}GpuMemoryNearlyFull", "severity": "warning", **EX0, "gpu": "0",
    "uuid": "GPU-0",
}  # fmt: skip
EXHAUSTED = {
    "alertname": f"{P}TfServingResourceExhausted", "severity": "warning", **TFS0,
    "model_name": "gen",
}  # fmt: skip
META = {"severity": "critical", "meta": "true", "team": "monitoring"}


@pytest.fixture(scope="module")
def am_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _alertmanager(tmp_path_factory.mktemp("am")) as url:
        yield url


def _name(alert: dict[str, str]) -> str:
    return alert["alertname"]


# (row, alerts firing together, the names Alertmanager must suppress)
CASES = [
    ("R3 during the outage: the burn it causes is the outage", [DOWN0, FLEET, BURN], {_name(BURN)}),
    ("R3 after recovery: the fleet hold covers the burn", [FLEET, BURN], {_name(BURN)}),
    ("R4-R8 crash loop: the loop's page explains the burn", [FLAP, BURN], {_name(BURN)}),
    ("R4-R8 after the loop: its page's hold covers the burn", [RECENTLY, BURN], {_name(BURN)}),
    ("R4-R8 one replica's loop hides no fleet burn", [FLAP0, BURN], set()),
    ("N1+N2 a replica down hides no fleet burn", [DOWN1, RECENTLY1, BURN], set()),
    ("N4 one gateway pod down hides no fleet burn", [GW1_DOWN, BURN], set()),
    ("G3 GPU memory explains RESOURCE_EXHAUSTED", [GPU_FULL, EXHAUSTED], {_name(EXHAUSTED)}),
]


@pytest.mark.parametrize(("alerts", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_scenario_reaches_a_person_once(
    am_url: str, alerts: list[dict[str, str]], want: set[str]
) -> None:
    assert _suppressed(am_url, *alerts, want=want) == want


def _receivers(labels: dict[str, str]) -> set[str]:
    out = subprocess.run(
        ["amtool", "config", "routes", "test", f"--config.file={AM_CONFIG}",
         *(f"{k}={v}" for k, v in labels.items())],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return set(out.stdout.strip().split(","))


# (rows, labels of the alert the row expects, receivers it must reach, receivers it must not)
BURN_TICKET = {**BURN, "severity": "warning", "long_window": "3d"}
PAGER_FAILING = {
    "alertname": f"{P}AlertmanagerFailedToSendAlerts",
    **META,
    "integration": "pagerduty",
}
EXPORTER_DOWN = {"alertname": f"{P}ExporterDown", "severity": "warning", **EX0}
MISMATCH = {"alertname": f"{P}CanaryMismatch", "severity": "warning", **EX0, "version": "2"}
WATCHDOG = {"alertname": "Watchdog", "severity": "none"}
# one of an HA pair: a warning (the peer still pages); both down is the dead man's switch's
PROMETHEUS_DOWN = {
    "alertname": f"{P}PrometheusDown", **META, "severity": "warning", "job": "prometheus",
    "instance": "prometheus-1:9090",
}  # fmt: skip
ROUTES = [
    ("T3-T8 N2 burn pages", BURN, {"pager"}, set()),
    ("T1 slow burn tickets", BURN_TICKET, {"ticket"}, {"pager"}),
    ("R2 R3 N1 TfServingDown pages", DOWN0, {"pager"}, set()),
    ("R4-R8 crash loop pages", FLAP0, {"pager"}, set()),
    ("R3 holds notify nobody", FLEET, {"null"}, {"pager"}),
    ("M1 one Prometheus down chats", PROMETHEUS_DOWN, {"chat", "meta"}, {"pager"}),
    ("M2 Alertmanager down pages", {"alertname": f"{P}AlertmanagerDown", **META}, {"pager"}, set()),
    ("M3 PagerDuty failing reaches a second path", PAGER_FAILING, {"pager", "meta"}, set()),
    ("M5 exporter down chats", EXPORTER_DOWN, {"chat"}, {"pager"}),
    ("C2 canary mismatch chats", {**MISMATCH, "model": "gen"}, {"chat"}, {"pager"}),
    ("G3 GPU memory chats", GPU_FULL, {"chat"}, {"pager"}),
    ("M7 Watchdog to its own route", WATCHDOG, {"watchdog"}, {"pager"}),
]


@pytest.mark.parametrize(
    ("labels", "must", "never"), [r[1:] for r in ROUTES], ids=[r[0] for r in ROUTES]
)
def test_scenario_route(labels: dict[str, str], must: set[str], never: set[str]) -> None:
    got = _receivers(labels)
    assert must <= got and not never & got, got
