"""The lint catches each broken house rule (a lint that passes everything proves nothing).

Undeclared metrics are the catalogue check's business: tests/monitoring/mixin/test_references.py.
"""

from __future__ import annotations

import copy
import json

import pytest

from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.dashboards import render_all
from monitoring.mixin.dashboards.lint import lint


@pytest.fixture
def models():
    return {name: json.loads(text) for name, text in render_all(config).items()}


def _first_panel(model):
    return next(p for p in model["panels"] if p["type"] != "row")


@pytest.mark.parametrize(
    ("breakage", "problem"),
    [
        (lambda p: p.pop("description"), "no description"),
        (lambda p: p["fieldConfig"]["defaults"].pop("unit"), "no unit"),
        (lambda p: p.update(title=""), "no title"),
        (lambda p: p["targets"][0].update(legendFormat=""), "has no legend"),
        (lambda p: p.update(datasource={"type": "prometheus", "uid": "prod-1"}),
         "hard-coded datasource"),
        (lambda p: p["targets"][0].update(datasource="Prometheus"), "given by name"),
        (lambda p: p["fieldConfig"]["defaults"]["thresholds"].update(steps=[]), "no thresholds"),
        (lambda p: p.update(links=[{"url": config.links.runbook_url("TokenPulseNoSuchAlert")}]),
         "runbook that does not exist: TokenPulseNoSuchAlert"),
        (lambda p: p["targets"][0].update(expr='up{job=~"$nosuch"}'),
         "uses $nosuch, which the dashboard does not define"),
        (lambda p: p["targets"][0].update(expr='up{gpu="$gpu"}'),
         "matches gpu with = on multi-value $gpu"),
        (lambda p: p["targets"][0].update(legendFormat="{{code}}"),
         "legend names code, which query A drops"),
    ],
)  # fmt: skip
def test_each_broken_rule_is_reported(models, breakage, problem):
    broken = copy.deepcopy(models)
    name = sorted(broken)[0]
    breakage(_first_panel(broken[name]))
    problems = lint(broken, config.links.runbook_url_pattern)
    assert len(problems) == 1 and problem in problems[0], problems


def test_duplicate_uid_and_missing_datasource_variable(models):
    broken = copy.deepcopy(models)
    a, b = sorted(broken)[:2]
    broken[b]["uid"] = broken[a]["uid"]
    broken[a]["templating"]["list"] = [
        v for v in broken[a]["templating"]["list"] if v["name"] != "datasource"
    ]
    problems = "\n".join(lint(broken, config.links.runbook_url_pattern))
    assert "duplicate uid" in problems
    assert "does not match uid" in problems
    assert "no datasource variable" in problems


def test_a_link_to_a_missing_variable_is_dead(models):
    """The serving dashboard's Kibana links filter on $version: without the variable, Grafana
    would send the literal text and Kibana find nothing."""
    broken = copy.deepcopy(models)
    serving = broken["tokenpulse-serving.json"]
    serving["templating"]["list"] = [
        v for v in serving["templating"]["list"] if v["name"] != "version"
    ]
    problems = lint(broken, config.links.runbook_url_pattern)
    assert problems and all("uses $version" in p for p in problems), problems
    linked = {p.split(" / ")[1].split(":")[0] for p in problems}
    assert {"Requests/s by status", "Request latency (predict)"} <= linked


def test_legends_kept_by_label_replace_and_plain_selectors_pass(models):
    fine = copy.deepcopy(models)
    panel = _first_panel(fine["tokenpulse-serving.json"])
    panel["targets"][0].update(
        expr='label_replace(sum by (a) (x{job="j"}), "b", "$1", "a", "(.*)")',
        legendFormat="{{a}} {{b}}",
    )
    panel["targets"].append({"refId": "Z", "expr": "x", "legendFormat": "{{anything}}"})
    assert lint(fine, config.links.runbook_url_pattern) == []
