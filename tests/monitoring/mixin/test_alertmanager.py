"""The generated Alertmanager configs: amtool-valid, every route tested, inhibition sound."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from monitoring.mixin import alertmanager
from monitoring.mixin.alerts import all_alerts
from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.promql import NORMAL
from tokenpulse.paths import ROOT

FILES = [
    ROOT / "monitoring/alertmanager/alertmanager.yml",
    ROOT / "monitoring/alertmanager/alertmanager.local.yml",
]
amtool = pytest.mark.skipif(shutil.which("amtool") is None, reason="amtool not installed")

# (labels of an alert, the receiver it must reach): one case per route, plus the root fallback
ROUTE_CASES = [
    (["alertname=Watchdog", "severity=none"], "watchdog"),
    (["alertname=Watchdog", "severity=none", "meta=true"], "watchdog"),
    # the monitoring's own alerts: on the secret-free meta webhook first (a pager whose secret
    # is missing cannot hide the alert saying so), then on to the pager or chat like any other
    (["alertname=AlertmanagerFailedToSendAlerts", "severity=critical", "meta=true"], "meta,pager"),
    (["alertname=PrometheusMissingRuleEvaluations", "severity=warning", "meta=true"], "meta,chat"),
    (["severity=info", "alertname=TokenPulseQualityNllDrift", "model=gen"], "null"),
    (["severity=critical", "alertname=TokenPulseTfServingDown"], "pager"),
    (
        [
            "severity=critical",
            "alertname=TokenPulseGatewayAvailabilityBudgetBurn",
            "slo=availability",
            "long_window=1h",
            "model=gen",
        ],
        "pager",
    ),  # fmt: skip
    (
        [
            "severity=warning",
            "alertname=TokenPulseGatewayLatencyBudgetBurn",
            "slo=latency",
            "long_window=1d",
            "model=gen",
        ],
        "ticket",
    ),  # fmt: skip
    (["severity=warning", "alertname=TokenPulseGpuThrottled", "gpu=0"], "chat"),
    (["alertname=SomethingWithoutSeverity"], "chat"),
]


@amtool
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_amtool_check_config_is_clean(path: Path) -> None:
    out = subprocess.run(
        ["amtool", "check-config", str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


@amtool
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
@pytest.mark.parametrize(("labels", "receiver"), ROUTE_CASES)
def test_every_route_reaches_its_receiver(path: Path, labels: list[str], receiver: str) -> None:
    cmd = ["amtool", "config", "routes", "test", f"--config.file={path}"]
    out = subprocess.run(
        [*cmd, f"--verify.receivers={receiver}", *labels],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == receiver


@amtool
def test_route_test_fails_on_a_wrong_receiver() -> None:
    cmd = ["amtool", "config", "routes", "test", f"--config.file={FILES[0]}"]
    out = subprocess.run(
        [*cmd, "--verify.receivers=pager", "severity=warning", "alertname=X"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 1


def test_every_route_has_a_case_and_routes_match_the_module() -> None:
    doc = yaml.safe_load(FILES[0].read_text())
    routes = doc["route"]["routes"]
    assert [(r["receiver"], r["matchers"]) for r in routes] == alertmanager.ROUTES
    reached = {name for _, r in ROUTE_CASES for name in r.split(",")}
    assert reached == {r["receiver"] for r in routes} | {doc["route"]["receiver"]}
    # only the meta route lets an alert go on to the routes after it
    assert [r["receiver"] for r in routes if r.get("continue")] == ["meta"]
    assert doc["route"]["group_by"] == ["alertname", "model"]


def _inhibit(source: str) -> list[dict]:
    rules = yaml.safe_load(FILES[0].read_text())["inhibit_rules"]
    return [r for r in rules if source in r["source_matchers"]]


def _targets(rule: dict) -> set[str]:
    m = re.fullmatch(r'alertname=~"(.*)"', rule["target_matchers"][0])
    assert m is not None
    return set(m[1].split("|"))


def test_model_server_down_silences_every_symptom_but_not_itself() -> None:
    symptoms = {config.alertname(a.name) for a in all_alerts(config, NORMAL) if a.symptom}
    (rule, collectors) = _inhibit('alertname="TokenPulseTfServingDown"')
    targets = _targets(rule)
    assert symptoms | {"TokenPulseTfServingNoAvailableVersion"} == targets
    assert {"TokenPulseTfServingDown", "TokenPulseTfServingRecentlyDown"}.isdisjoint(targets)
    for name in ("GatewayAvailabilityBudgetBurn", "QualityEmptyOutputs", "CanaryFailing"):
        assert f"TokenPulse{name}" in targets
    assert rule["equal"] == collectors["equal"] == ["replica"]
    assert collectors["target_matchers"][1] == 'collector=~"tfserving|canary"'


def test_after_a_down_page_only_windowed_symptoms_stay_silenced() -> None:
    recently = 'alertname=~"TokenPulseTfServingRecentlyDown|TokenPulseTfServingFleetRecentlyDown"'
    (rule,) = _inhibit(recently)
    assert rule["equal"] == ["replica"]
    targets = _targets(rule)
    assert targets == {config.alertname(a.name) for a in all_alerts(config, NORMAL) if a.windowed}
    assert "TokenPulseGatewayAvailabilityBudgetBurn" in targets
    # state alerts show the present: a bad restart pages at once
    for state in ("TfServingNoAvailableVersion", "TfServingVersionLoadFailed"):
        assert f"TokenPulse{state}" not in targets


def test_no_available_version_silences_symptoms_of_the_same_model() -> None:
    (rule,) = _inhibit('alertname="TokenPulseTfServingNoAvailableVersion"')
    assert rule["equal"] == ["model", "replica"]
    assert "TokenPulseGatewayLatencyBudgetBurn" in _targets(rule)


def _matches(matcher: str, labels: dict[str, str]) -> bool:
    m = re.fullmatch(r'(\w+)(=~|=)"(.*)"', matcher)
    assert m is not None, matcher
    name, op, value = m.groups()
    got = labels.get(name, "")
    return re.fullmatch(value, got) is not None if op == "=~" else got == value


def _inhibited(target: dict[str, str], firing: list[dict[str, str]]) -> bool:
    """Alertmanager's inhibition: a firing source and the target match, the `equal` labels agree
    (an absent label counts as empty), and an alert never inhibits itself."""
    rules = yaml.safe_load(FILES[0].read_text())["inhibit_rules"]
    return any(
        source != target
        and all(_matches(m, source) for m in r["source_matchers"])
        and all(_matches(m, target) for m in r["target_matchers"])
        and all(source.get(k, "") == target.get(k, "") for k in r.get("equal", []))
        for r in rules
        for source in firing
    )


def _alert(name: str, severity: str, **labels: str) -> dict[str, str]:
    return {"alertname": f"TokenPulse{name}", "severity": severity, **labels}


@pytest.mark.parametrize("replicas", [1, 2], ids=["one-replica", "two-replicas"])
def test_inhibitions_are_scoped_by_replica(replicas: int) -> None:
    one = {"replica": "1"} if replicas == 2 else {}
    other = {"replica": "0"} if replicas == 2 else {}
    down = [
        _alert("TfServingDown", "critical", job="tfserving", **one),
        _alert("TfServingRecentlyDown", "info", job="tfserving", **one),
    ]
    if replicas == 1:  # the only replica down is the whole fleet down
        down.append(_alert("TfServingFleetRecentlyDown", "info"))
    slo = _alert("GatewayAvailabilityBudgetBurn", "critical", model="gen", slo="availability")
    canary_here = _alert("CanaryFailing", "warning", model="gen", version="1", **one)
    canary_there = _alert("CanaryFailing", "warning", model="gen", version="1", **other)
    collector = _alert("ExporterCollectorFailing", "warning", collector="tfserving", **one)
    other_down = _alert("TfServingDown", "critical", job="tfserving", **other)
    assert _inhibited(canary_here, down) and _inhibited(collector, down)
    # with two replicas, replica 1 down hides neither replica 0's alerts nor the fleet's
    assert _inhibited(slo, down) is (replicas == 1)
    assert _inhibited(canary_there, down) is (replicas == 1)
    assert not _inhibited(other_down, down)
    # every replica paged down: the fleet's windowed symptoms are silenced; a state alert of a
    # replica only while that replica's own page fires
    fleet_down = down + [_alert("TfServingFleetRecentlyDown", "info")]
    assert _inhibited(slo, fleet_down)
    assert _inhibited(canary_there, fleet_down) is (replicas == 1)
    assert _inhibited(canary_there, fleet_down + [other_down])
    # back up (the pages resolved), inside the recovery window: the burn stays silenced; the
    # model with no AVAILABLE version after the restart pages
    recovering = [_alert("TfServingRecentlyDown", "info", job="tfserving", **one)]
    recovering.append(_alert("TfServingFleetRecentlyDown", "info"))
    no_version = _alert("TfServingNoAvailableVersion", "critical", model="gen", **one)
    assert _inhibited(slo, recovering) and not _inhibited(no_version, recovering)


def test_gateway_down_silences_only_gateway_windowed_alerts() -> None:
    (rule,) = _inhibit('alertname="TokenPulseGatewayDown"')
    assert _targets(rule) == {
        "TokenPulseGatewayAvailabilityBudgetBurn",
        "TokenPulseGatewayCircuitBreakerOpen",
        "TokenPulseGatewayLatencyBudgetBurn",
        "TokenPulseGatewayTokenLatencyBudgetBurn",
        "TokenPulseGatewayTtftBudgetBurn",
        "TokenPulseGatewayThroughputDrop",
        "TokenPulseGatewayTrafficCollapse",
    }


def test_deployment_secrets_come_from_files_and_resolved_notifications_are_sent() -> None:
    receivers = {r["name"]: r for r in yaml.safe_load(FILES[0].read_text())["receivers"]}
    pd = receivers["pager"]["pagerduty_configs"][0]
    slack = receivers["chat"]["slack_configs"][0]
    assert pd["routing_key_file"].startswith("/etc/alertmanager/secrets/")
    assert slack["api_url_file"].startswith("/etc/alertmanager/secrets/")
    assert slack["send_resolved"] is True and pd["send_resolved"] is True
    assert "routing_key" not in pd and "api_url" not in slack


def test_local_variant_points_every_receiver_at_the_oncall_receiver() -> None:
    text = alertmanager.render_local(config, "http://127.0.0.1:1234", group_wait="1s")
    doc = yaml.safe_load(text)
    urls = {
        r["name"]: r["webhook_configs"][0]["url"] for r in doc["receivers"] if r["name"] != "null"
    }
    names = ("watchdog", "meta", "pager", "ticket", "chat")
    assert urls == {n: f"http://127.0.0.1:1234/{n}" for n in names}
    assert doc["route"]["group_wait"] == "1s"
    assert doc["inhibit_rules"] == yaml.safe_load(FILES[0].read_text())["inhibit_rules"]


def test_watchdog_route_repeats_on_its_own_short_interval() -> None:
    """A dead man's switch must hear it every interval, whatever the pages' 4 h repeat."""
    for doc in (
        yaml.safe_load(FILES[0].read_text()),
        yaml.safe_load(alertmanager.render_local(config, "http://x", watchdog_interval="5s")),
    ):
        (route,) = [r for r in doc["route"]["routes"] if r["receiver"] == "watchdog"]
        local = doc["receivers"][0]["webhook_configs"][0]["url"] == "http://x/watchdog"
        want, half = ("5s", "2s") if local else ("1m", "30s")
        # a repeat due at every tick (tests/monitoring/oncall/test_watchdog_alertmanager.py
        # measures it in a real Alertmanager: equal intervals send every other tick)
        assert route["group_interval"] == want and route["repeat_interval"] == half
        assert route["group_wait"] == "0s"
        (hook,) = doc["receivers"][0]["webhook_configs"]
        assert doc["receivers"][0]["name"] == "watchdog" and hook["send_resolved"] is False


def test_meta_receiver_needs_no_secret_file() -> None:
    receivers = {r["name"]: r for r in yaml.safe_load(FILES[0].read_text())["receivers"]}
    assert list(receivers["meta"]) == ["name", "webhook_configs"]
    assert "_file" not in str(receivers["meta"]) and "_file" not in str(receivers["watchdog"])
