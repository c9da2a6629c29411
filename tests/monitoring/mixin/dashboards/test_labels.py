"""No selector matches on a label its metric does not carry: the labels come from the components'
own metric declarations (gateway, log pipeline, model server, the exporter's table) and the SLI
recording rules."""

from __future__ import annotations

import copy
import json
import re

import pytest
from prometheus_client import CollectorRegistry

from log_pipeline.metrics import OUTPUTS, ShipperMetrics, SinkMetrics
from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.dashboards import render_all
from monitoring.mixin.dashboards.lint import label_problems
from monitoring.mixin.promql import NORMAL
from monitoring.mixin.rules import sli_rules
from serving.gateway.metrics import GatewayMetrics
from serving.modelserver.metrics import ServingMetrics, _Metric, _prom_name
from stack.catalogue import EXPORTER_README
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

# Prometheus adds these to every scraped series (the replica label: the local and compose targets)
# `run`: the training job's target label, from the run's targets file (serving/model/targets.py)
TARGET_LABELS = {"job", "instance", config.replica_label, "run"}
SUFFIXES = {"counter": ("", "_total"), "histogram": ("", "_bucket", "_sum", "_count")}
_EXPORTER_ROW = re.compile(r"^\| `(tokenpulse_\w+)` \| (\w+) \| ([^|]*) \|", re.M)


def _series(name: str, kind: str, labels: set[str]) -> dict[str, set[str]]:
    return {
        name + suffix: labels | ({"le"} if suffix == "_bucket" else set())
        for suffix in SUFFIXES.get(kind, ("",))
    }


def _client_labels(registry: CollectorRegistry) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    # prometheus_client keeps a collector's series names and label names to itself
    for collector, names in registry._collector_to_names.items():
        labels = set(getattr(collector, "_labelnames", ()))
        for name in names:
            out[name] = labels | ({"le"} if name.endswith("_bucket") else set())
    return out


def catalogue() -> dict[str, set[str]]:
    """Series name -> the labels its component declares."""
    out = _client_labels(GatewayMetrics(models=(DEFAULT_MODEL_NAME,)).registry)
    pipeline = CollectorRegistry(auto_describe=False)
    SinkMetrics(pipeline)
    ShipperMetrics(pipeline, OUTPUTS)
    out |= _client_labels(pipeline)
    for metric in vars(ServingMetrics()).values():
        if isinstance(metric, _Metric):
            kind = type(metric).__name__.lower()
            out |= _series(_prom_name(metric.internal_name), kind, set(metric.labels))
    for name, kind, labels in _EXPORTER_ROW.findall(EXPORTER_README.read_text()):
        found = {label.strip(" `") for label in labels.split(",")} - {"", "—", "-"}
        out |= _series(name.removesuffix("_total"), kind, found) | {name: found}
    for rule in sli_rules(config, NORMAL):  # recorded per model, with the window as a label
        grouped = re.findall(r"by \(([^)]*)\)", rule["expr"])
        kept = {label.strip() for g in grouped for label in g.split(",")}
        out[rule["record"]] = kept | set(rule.get("labels", {}))
    out["up"] = set()
    return out


@pytest.fixture(scope="module")
def models() -> dict[str, dict]:
    return {name: json.loads(text) for name, text in render_all(config).items()}


def test_the_catalogue_knows_what_the_dashboards_select(models) -> None:
    labels = catalogue()
    assert labels["tokenpulse_gateway_queue_wait_seconds_bucket"] == {"model", "route", "le"}
    assert {"model_name", "API"} <= labels[":tensorflow:serving:request_latency_bucket"]
    assert "gpu" in labels["tokenpulse_gpu_utilization_ratio"]
    assert labels["model:gateway_errors:ratio_rate5m"] == {"model", "window"}


def test_no_selector_matches_on_a_label_its_metric_lacks(models) -> None:
    assert label_problems(models, catalogue(), TARGET_LABELS) == []


def test_a_version_matcher_on_the_queue_wait_is_caught(models) -> None:
    """The queue wait is measured before routing, so it has no version: `$version` on it would
    empty the panel as soon as one version is chosen."""
    broken = copy.deepcopy(models)
    panel = next(p for p in broken["tokenpulse-slo.json"]["panels"]
                 if p["title"] == "Latency breakdown (mean)")  # fmt: skip
    target = next(t for t in panel["targets"] if "queue_wait" in t["expr"])
    target["expr"] = target["expr"].replace('model=~"$model"', 'model=~"$model", version=~"$v"')
    problems = label_problems(broken, catalogue(), TARGET_LABELS)
    assert [p.split(": ", 1)[1] for p in problems] == [
        f"tokenpulse_gateway_queue_wait_seconds_{s} has no label version: the selector matches "
        "nothing once one is chosen"
        for s in ("sum", "count")
    ]
