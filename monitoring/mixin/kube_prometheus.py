"""The Prometheus Operator's Prometheus and Alertmanager for TokenPulse, highly available: the
Helm values of kube-prometheus-stack (deploy/k8s/kube-prometheus-stack/values.yaml), which
creates both resources in namespace `monitoring` from `prometheusSpec` and `alertmanagerSpec`.

The same shape as `tokenpulse up --ha` and compose: two Prometheus replicas evaluate the same
rules, each with its pod name under the external label prometheus.REPLICA_EXTERNAL_LABEL, which
the operator drops from the alerts they send (as prometheus.yml's `labeldrop` does), so the
Alertmanagers merge the two copies of an alert into one; three Alertmanager replicas form one
gossip cluster (the operator peers them through its governing Service), so each group is
notified once, and one replica may be lost, or rescheduled, while the other two still deliver.
"""

from __future__ import annotations

from typing import Any

import yaml

from monitoring.mixin import prometheus
from monitoring.mixin.config import MixinConfig

Doc = dict[str, Any]

PROMETHEUS_REPLICAS = 2
ALERTMANAGER_REPLICAS = 3
APP_NAMESPACE = "tokenpulse"  # where the AlertmanagerConfig lives (deploy/k8s/base)
# kube-prometheus-stack's own switches, not fields of the Prometheus resource: without them the
# chart selects only rules and monitors labelled with its release name, and none of TokenPulse's
CHART_SWITCHES = {
    "ruleSelectorNilUsesHelmValues": False,
    "serviceMonitorSelectorNilUsesHelmValues": False,
    "podMonitorSelectorNilUsesHelmValues": False,
}


def prometheus_spec(cfg: MixinConfig) -> Doc:
    """The Prometheus resource's spec fields TokenPulse sets (all of them CRD fields)."""
    return {
        "replicas": PROMETHEUS_REPLICAS,
        # each replica's pod name under this label, dropped from the alerts it sends
        "replicaExternalLabelName": prometheus.REPLICA_EXTERNAL_LABEL,
        # no enforcedNamespaceLabel: on a shared Prometheus it rewrites every team's rule results
        # to their PrometheusRule's namespace; TokenPulse's alerts carry `namespace` themselves
        # (operator.prometheus_rules; deploy/k8s/README.md, Alert routing)
        # the gateway's exemplars link a latency spike to its sample
        "enableFeatures": ["exemplar-storage"],
        "scrapeInterval": cfg.scrape_interval,
        "evaluationInterval": cfg.evaluation_interval,
    }


def alertmanager_spec() -> Doc:
    """The Alertmanager resource's spec fields TokenPulse sets (all of them CRD fields)."""
    return {
        "replicas": ALERTMANAGER_REPLICAS,
        "alertmanagerConfigSelector": {},  # every AlertmanagerConfig ...
        "alertmanagerConfigNamespaceSelector": {  # ... of TokenPulse's namespace
            "matchLabels": {"kubernetes.io/metadata.name": APP_NAMESPACE}
        },
    }


def values(cfg: MixinConfig) -> Doc:
    """kube-prometheus-stack's Helm values for both resources."""
    return {
        "prometheus": {"prometheusSpec": {**prometheus_spec(cfg), **CHART_SWITCHES}},
        "alertmanager": {"alertmanagerSpec": alertmanager_spec()},
        # Grafana loads the dashboard ConfigMaps of every namespace
        "grafana": {"sidecar": {"dashboards": {"enabled": True, "searchNamespace": "ALL"}}},
    }


def render(cfg: MixinConfig, header: str) -> str:
    """deploy/k8s/kube-prometheus-stack/values.yaml."""
    note = (
        "# kube-prometheus-stack's Helm values (namespace monitoring): two Prometheus replicas\n"
        "# and three Alertmanager replicas for TokenPulse, no single point of failure in paging.\n"
    )
    return header + note + yaml.safe_dump(values(cfg), sort_keys=False, width=100)
