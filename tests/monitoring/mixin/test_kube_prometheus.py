"""The Operator's Prometheus and Alertmanager (kube-prometheus-stack's values): highly available,
as `up --ha` and compose are, and every resource field one the CRD has."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
import yaml

from monitoring.mixin import kube_prometheus, operator, prometheus
from monitoring.mixin.config import DEFAULT as config
from tokenpulse.paths import ROOT

SCHEMAS = ROOT / "deploy" / "k8s" / "schemas"


def _resource(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The resource the chart makes of a spec, as the operator receives it."""
    meta = {"name": "kube-prometheus-stack", "namespace": "monitoring"}
    return {"apiVersion": operator.API, "kind": kind, "metadata": meta, "spec": spec}


def _validate(doc: dict[str, Any]) -> None:
    schema = json.loads((SCHEMAS / f"monitoring.coreos.com_v1_{doc['kind']}.json").read_text())
    jsonschema.validate(doc, schema)


def test_two_prometheus_replicas_told_apart_by_a_label_the_alerts_lose() -> None:
    spec = kube_prometheus.prometheus_spec(config)
    assert spec["replicas"] == 2
    # the same label the local and compose Prometheus pairs carry and drop (prometheus.yml)
    assert spec["replicaExternalLabelName"] == prometheus.REPLICA_EXTERNAL_LABEL
    assert spec["replicaExternalLabelName"] != config.replica_label  # a model-server replica
    assert spec["evaluationInterval"] == config.evaluation_interval
    _validate(_resource("Prometheus", spec))


def test_three_alertmanager_replicas_select_tokenpulses_routes() -> None:
    spec = kube_prometheus.alertmanager_spec()
    assert spec["replicas"] == 3
    selector = spec["alertmanagerConfigNamespaceSelector"]["matchLabels"]
    assert selector == {"kubernetes.io/metadata.name": "tokenpulse"}
    _validate(_resource("Alertmanager", spec))


@pytest.mark.parametrize(
    ("kind", "spec", "typo"),
    [
        ("Prometheus", kube_prometheus.prometheus_spec(config), "replicaExternalLabel"),
        ("Alertmanager", kube_prometheus.alertmanager_spec(), "replica"),
    ],
)
def test_the_schemas_catch_a_misspelt_field(kind: str, spec: dict, typo: str) -> None:
    bad = copy.deepcopy(spec)
    bad[typo] = bad.pop(next(iter(bad)))
    with pytest.raises(jsonschema.ValidationError):
        _validate(_resource(kind, bad))
    with pytest.raises(jsonschema.ValidationError):
        _validate(_resource(kind, {**spec, "replicas": "two"}))


def test_values_put_the_specs_where_the_chart_reads_them() -> None:
    values = yaml.safe_load(operator.files(config)[operator.KUBE_PROMETHEUS_STACK / "values.yaml"])
    prom = values["prometheus"]["prometheusSpec"]
    chart_only = set(kube_prometheus.CHART_SWITCHES)
    assert {k: v for k, v in prom.items() if k not in chart_only} == (
        kube_prometheus.prometheus_spec(config)
    )
    assert all(prom[k] is False for k in chart_only)  # TokenPulse's rules and monitors too
    assert values["alertmanager"]["alertmanagerSpec"] == kube_prometheus.alertmanager_spec()
