"""The generated rules against a real running stack: series exist, a healthy stack notifies nobody,
a model-server outage pages exactly once and resolves.

The shared test stack (tests/conftest.py: model server, gateway, exporter with fake NVML, shipper,
real Prometheus, real Alertmanager, on-call receiver) serves the whole module, with the
TIME-COMPRESSED rule set
(alerts/compressed/: every window and `for` divided by COMPRESSION_FACTOR = 60, never under 5 s),
so 150 s of steady traffic stands for 2.5 hours of alerting. Tests run in file order.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request

import pytest
import yaml
from prometheus_client import generate_latest

from devtools.stack import MODEL, Stack, wait_until
from serving.model.metrics import TrainingMetrics
from tests.support.binaries import needs_prometheus
from tokenpulse.paths import ROOT

HEALTHY_S = 150  # x60 compression: 2.5 hours of steady traffic
SYMPTOM_OF_DOWN = "TokenPulseGatewayAvailabilityBudgetBurn"

pytestmark = [pytest.mark.slow, needs_prometheus]


@pytest.fixture(scope="module")
def stack(shared_stack: Stack) -> Stack:
    return shared_stack


def _page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


def _exposed_names(text: str) -> set[str]:
    """Metric names with samples, plus families declared by # TYPE (event-only series)."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            names.add(line.split()[2])
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def _rule_metric_names() -> set[str]:
    names = set()
    for path in (ROOT / "alerts/recording.rules.yml", ROOT / "alerts/alerts.rules.yml"):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                names |= set(
                    re.findall(r"(?<![\w:])(tokenpulse_\w+|:tensorflow:[\w:]+)", rule["expr"])
                )
    return names


def test_rules_reference_only_series_the_components_export(stack: Stack) -> None:
    for _ in range(5):
        assert stack.generate().status_code == 200
    assert stack.refused().status_code == 422  # a sample the shipper has to ship
    wait_until(
        lambda: "tokenpulse_canary_match{" in _page(stack.exporter.metrics_url), 60, "canary"
    )
    wait_until(lambda: "shipped_total{output=\"sqlite\"} 0.0" not in _page(stack.shipper_url), 60,
               "the shipper to ship")  # fmt: skip
    exported = set().union(
        *(
            _exposed_names(_page(url))
            for url in (
                stack.modelserver.metrics_url,
                f"{stack.gateway.url}/metrics",
                stack.exporter.metrics_url,
                stack.shipper_url,
            )
        )
    )
    # a training worker's page (no run in this stack): the registry every worker serves
    exported |= _exposed_names(generate_latest(TrainingMetrics().registry).decode())
    referenced = _rule_metric_names()
    assert len(referenced) >= 35
    assert referenced - exported == set(), "rules wait on series that nothing exports"


def test_runbook_promql_runs_on_the_live_prometheus(stack: Stack) -> None:
    from tests.alerts.test_house_style import runbook_promql

    queries = runbook_promql()
    assert len(queries) > 60
    for alert, expr in queries:
        try:
            stack.query(expr)
        except Exception as exc:  # noqa: BLE001 - name the runbook line that broke
            pytest.fail(f"{alert}: {expr!r}: {exc}")


def test_every_rule_evaluates_without_error(stack: Stack) -> None:
    # A group not evaluated yet says "unknown"; wait for one evaluation of each, then judge.
    def evaluated() -> list[dict] | None:
        rules = stack.rule_health()
        return rules if all(r["health"] != "unknown" for r in rules) else None

    rules = wait_until(evaluated, 120, "one evaluation of every rule group")
    assert len(rules) > 70
    assert [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"] == []


def test_healthy_stack_under_steady_traffic_notifies_nobody(stack: Stack) -> None:
    before = len(stack.notifications())
    with stack.traffic(rps=1.0) as codes:
        time.sleep(HEALTHY_S)
        # Every evaluation of the error ratio since the traffic settled: the highest must be 0.
        # One evaluation alone can read 0/0, NaN, when a busy machine answers no request inside the
        # compressed 5 s window (CI read so for 30 s on end); max_over_time skips NaN, so "0" says
        # requests were counted and no evaluation saw an error, and "NaN" that none counted any.
        since = f"{HEALTHY_S - 10}s"
        ratio = stack.query(
            f'max_over_time(model:gateway_errors:ratio_rate5m{{model="{MODEL}"}}[{since}])'
        )
        assert [r["value"][1] for r in ratio] == ["0"], ratio
    assert codes and set(codes) == {200}
    assert _firing(stack) == set()
    assert _notified(stack.notifications()[before:]) == []


def _firing(stack: Stack) -> set[str]:
    """Firing alerts but the Watchdog, which always fires."""
    names = {a["labels"]["alertname"] for a in stack.alerts() if a["state"] == "firing"}
    return names - {"Watchdog"}


def _notified(notes: list[dict]) -> list[dict]:
    """Notifications but the Watchdog's heartbeats."""
    return [n for n in notes if n["receiver"] != "watchdog"]


def _am_suppressed(stack: Stack) -> set[str]:
    doc = json.loads(_page(f"{stack.alertmanager_url}/api/v2/alerts"))
    return {a["labels"]["alertname"] for a in doc if a["status"]["state"] == "suppressed"}


def _alerts(notes: list[dict], status: str) -> list[tuple[str, dict]]:
    return [(n["receiver"], a) for n in notes for a in n["alerts"] if a["status"] == status]


def test_model_server_outage_pages_once_with_runbook_and_resolves(stack: Stack) -> None:
    before = len(stack.notifications())
    with stack.traffic(rps=2.0):
        time.sleep(5)
        stack.stop_modelserver()
        wait_until(
            lambda: _alerts(_notified(stack.notifications()[before:]), "firing"), 120, "the page"
        )
        # the symptoms fire in Prometheus, and Alertmanager holds them back
        wait_until(lambda: SYMPTOM_OF_DOWN in _firing(stack), 60, "a symptom to fire")
        assert SYMPTOM_OF_DOWN in wait_until(lambda: _am_suppressed(stack), 30, "inhibition")
        stack.start_modelserver()
        wait_until(
            lambda: _alerts(_notified(stack.notifications()[before:]), "resolved"), 120, "resolved"
        )
        time.sleep(20)  # the outage ages out of the symptoms' windows: still nothing new
    notes = _notified(stack.notifications()[before:])
    (fired,) = _alerts(notes, "firing")
    (resolved,) = _alerts(notes, "resolved")
    receiver, alert = fired
    assert receiver == "pager"
    assert alert["labels"]["alertname"] == "TokenPulseTfServingDown"
    assert alert["labels"]["severity"] == "critical"
    # the stack's rules link the runbooks its own on-call receiver serves
    assert alert["annotations"]["runbook_url"] == (
        f"{stack.oncall_url}/runbooks/TokenPulseTfServingDown"
    )
    assert resolved[0] == "pager"
    assert resolved[1]["labels"]["alertname"] == "TokenPulseTfServingDown"
