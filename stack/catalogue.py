"""The metric catalogue: every series name a component declares, gathered from the components.

The gateway, model server, log pipeline and training workers declare their metrics in code (their
metric classes); the exporter's table is its README (contract-tested against what it exposes).
Prometheus adds a few series of its own to every target. `tokenpulse build --check` checks every
rule, dashboard and runbook query against this catalogue.
"""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry

from log_pipeline.metrics import OUTPUTS, ShipperMetrics, SinkMetrics
from serving.gateway.metrics import GatewayMetrics
from serving.model.metrics import TrainingMetrics
from serving.modelserver.metrics import ServingMetrics
from tokenpulse import paths
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

# the exporter's metric table, `| `name` | type | ...`; counters are listed with `_total`
EXPORTER_README = paths.ROOT / "exporter" / "README.md"
_EXPORTER_ROW = re.compile(r"^\| `(tokenpulse_\w+)` \| (\w+) \|", re.M)
# Series Prometheus itself adds: for every scraped target, and for every alert (ALERTS).
PROMETHEUS_SERIES = frozenset(
    {
        "ALERTS",
        "ALERTS_FOR_STATE",
        "up",
        "scrape_duration_seconds",
        "scrape_samples_scraped",
        "scrape_samples_post_metric_relabeling",
        "scrape_series_added",
    }
)
# Prometheus's and Alertmanager's own series (both are scraped: jobs "prometheus" and
# "alertmanager"), those the meta-alerts read; names as of Prometheus 2.42 and Alertmanager 0.25.
MONITORING_SERIES = frozenset(
    {
        "prometheus_rule_evaluation_failures_total",
        "prometheus_rule_group_iterations_missed_total",
        "prometheus_notifications_alertmanagers_discovered",
        "prometheus_notifications_errors_total",
        "prometheus_notifications_sent_total",
        "alertmanager_notifications_failed_total",
        "alertmanager_notifications_total",
        "alertmanager_config_last_reload_successful",
        # a clustered Alertmanager only (`up --ha`, compose, the Operator's replicas)
        "alertmanager_cluster_members",
        "alertmanager_cluster_failed_peers",
        "alertmanager_peer_position",
    }
)
# family type -> the suffixes of its series (prometheus_client family names carry none)
_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "summary": ("", "_sum", "_count"),
    "info": ("_info",),
}


def series_names(name: str, kind: str) -> set[str]:
    """The series names of one metric family of the given type."""
    return {name + suffix for suffix in _SUFFIXES.get(kind, ("",))}


def _registry_names(registry: CollectorRegistry) -> set[str]:
    return {n for family in registry.collect() for n in series_names(family.name, family.type)}


def gateway() -> set[str]:
    """The gateway's series (GatewayMetrics)."""
    return _registry_names(GatewayMetrics(models=(DEFAULT_MODEL_NAME,)).registry)


def log_pipeline() -> set[str]:
    """The sampler, redaction, spool and shipper series (SinkMetrics, ShipperMetrics)."""
    registry = CollectorRegistry(auto_describe=False)
    SinkMetrics(registry)
    ShipperMetrics(registry, OUTPUTS)
    return _registry_names(registry)


def modelserver() -> set[str]:
    """TF Serving's series as the model server names them (ServingMetrics)."""
    metrics = ServingMetrics()
    metrics.batch_recorded()  # the batching histograms appear after the first batch
    names: set[str] = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\w+)$", metrics.render(), re.M):
        # TF Serving's counters have no `_total`
        names |= {name} if kind == "counter" else series_names(name, kind)
    return names


def training() -> set[str]:
    """A training worker's series (TrainingMetrics)."""
    return _registry_names(TrainingMetrics().registry)


def exporter() -> set[str]:
    """The exporter's series, from its metric table."""
    names: set[str] = set()
    for name, kind in _EXPORTER_ROW.findall(EXPORTER_README.read_text(encoding="utf-8")):
        names |= {name} if kind == "counter" else series_names(name, kind)
    return names


def declared_metrics() -> set[str]:
    """Every series name the model server, gateway, exporter, log pipeline, training workers,
    Prometheus and Alertmanager expose."""
    return (
        set(PROMETHEUS_SERIES | MONITORING_SERIES)
        | gateway()
        | modelserver()
        | exporter()
        | log_pipeline()
        | training()
    )
