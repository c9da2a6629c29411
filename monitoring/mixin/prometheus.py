"""Render prometheus.yml for given targets: the compose files and the local stack's run-time file.

High availability (compose always, `up --ha`, the Operator's `replicas: 2`): two Prometheus
evaluate the same rules and send every alert to every Alertmanager. Each carries its own value of
the external label REPLICA_EXTERNAL_LABEL and drops that label from the alerts it sends
(alert_relabel_configs), so the two copies of an alert have the same labels and Alertmanager
merges them into one: one notification per group, whichever Prometheus is alive. The rules
never read it (external labels are not on local series), so the `ALERTS`-based "recently down"
rules hold in each Prometheus from its own firing history, and their inhibitions apply in
Alertmanager to either copy of an alert.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import yaml

from monitoring.mixin.config import MixinConfig
from tokenpulse import ports
from tokenpulse.tfserving.config import DEFAULT_METRICS_PATH


@dataclass(frozen=True)
class Targets:
    """host:port of every scraped component; an empty list leaves that job out."""

    modelserver: Sequence[str] = ()
    gateway: Sequence[str] = ()
    exporter: Sequence[str] = ()
    shipper: Sequence[str] = ()
    alertmanager: Sequence[str] = ()
    prometheus: Sequence[str] = ()
    labels: dict[str, str] = field(default_factory=dict)  # added to every target
    # labels of single targets, by host:port: e.g. cfg.replica_label of each model server
    target_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    # file_sd files (globs) listing training workers: the runs register themselves there
    # (serving/model/targets.py); empty leaves the training job out
    training_files: Sequence[str] = ()


# The external label telling HA Prometheus replicas apart: prometheus-operator's default
# replicaExternalLabelName. Never cfg.replica_label, which names a model-server replica.
REPLICA_EXTERNAL_LABEL = "prometheus_replica"

# The components Prometheus scrapes, one job each (cfg.jobs names it, Targets lists its hosts).
SCRAPED = ("modelserver", "gateway", "exporter", "shipper", "alertmanager", "prometheus")
# compose runs two of each (HA); each Prometheus's file is named after its service
COMPOSE_PROMETHEUS = ("prometheus", "prometheus-2")
COMPOSE_ALERTMANAGERS = ("alertmanager", "alertmanager-2")

# where both Prometheus mount the volume the `training` service registers its run's workers in
COMPOSE_TRAINING_TARGETS = "/etc/prometheus/training-targets"
COMPOSE_TARGETS = Targets(
    modelserver=[f"tfserving:{ports.MODELSERVER_REST}"],
    gateway=[f"gateway:{ports.GATEWAY}"],
    exporter=[f"exporter:{ports.EXPORTER}"],
    shipper=[f"shipper:{ports.SHIPPER}"],
    alertmanager=[f"{name}:{ports.ALERTMANAGER}" for name in COMPOSE_ALERTMANAGERS],
    prometheus=[f"{name}:{ports.PROMETHEUS}" for name in COMPOSE_PROMETHEUS],
    training_files=[f"{COMPOSE_TRAINING_TARGETS}/*.json"],
)
COMPOSE_RULE_FILES = ["/etc/prometheus/rules/*.rules.yml"]


def _groups(targets: Targets, hosts: list[str]) -> list[dict[str, object]]:
    """One static_configs group per distinct label set, in target order."""
    groups: list[dict[str, object]] = []
    by_labels: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for host in hosts:
        labels = {**targets.labels, **targets.target_labels.get(host, {})}
        key = tuple(sorted(labels.items()))
        if key not in by_labels:
            by_labels[key] = []
            group: dict[str, object] = {"targets": by_labels[key]}
            if labels:
                group["labels"] = labels
            groups.append(group)
        by_labels[key].append(host)
    return groups


def scrape_configs(cfg: MixinConfig, targets: Targets) -> list[dict[str, object]]:
    """One scrape job per component with targets, named after cfg.jobs."""
    out: list[dict[str, object]] = []
    for component in SCRAPED:
        hosts = list(getattr(targets, component))
        if not hosts:
            continue
        job: dict[str, object] = {"job_name": getattr(cfg.jobs, component)}
        if component == "modelserver":
            job["metrics_path"] = DEFAULT_METRICS_PATH
        job["static_configs"] = _groups(targets, hosts)
        out.append(job)
    if targets.training_files:
        # a run's workers come and go with it: found in the files, refreshed on change
        sd = {"files": list(targets.training_files), "refresh_interval": "30s"}
        out.append({"job_name": cfg.jobs.training, "file_sd_configs": [sd]})
    return out


def render(
    cfg: MixinConfig,
    targets: Targets,
    rule_files: Sequence[str],
    *,
    alertmanagers: Sequence[str] = (),
    scrape_interval: str = "",
    evaluation_interval: str = "",
    header: str = "",
    replica: str = "",
) -> str:
    """prometheus.yml text; `replica` (HA) is this Prometheus's REPLICA_EXTERNAL_LABEL value; an
    interval left empty is the config's."""
    scrape_interval = scrape_interval or cfg.scrape_interval
    evaluation_interval = evaluation_interval or cfg.evaluation_interval
    glob: dict[str, object] = {
        "scrape_interval": scrape_interval,
        "evaluation_interval": evaluation_interval,
        # a scrape must finish before the next one starts
        "scrape_timeout": scrape_interval,
    }
    if replica:
        glob["external_labels"] = {REPLICA_EXTERNAL_LABEL: replica}
    doc: dict[str, object] = {"global": glob, "rule_files": list(rule_files)}
    if alertmanagers:
        alerting: dict[str, object] = {}
        if replica:  # both replicas' copies of an alert must be one alert to Alertmanager
            drop = {"action": "labeldrop", "regex": REPLICA_EXTERNAL_LABEL}
            alerting["alert_relabel_configs"] = [drop]
        alerting["alertmanagers"] = [{"static_configs": [{"targets": list(alertmanagers)}]}]
        doc["alerting"] = alerting
    doc["scrape_configs"] = scrape_configs(cfg, targets)
    return header + yaml.safe_dump(doc, sort_keys=False, width=100)


def render_compose(cfg: MixinConfig, service: str = COMPOSE_PROMETHEUS[0]) -> str:
    """monitoring/prometheus/<service>.yml for one Prometheus service of the compose deployment."""
    header = (
        "# Generated by `tokenpulse build` from monitoring/mixin; do not edit.\n"
        "# Compose deployment: rules are mounted at /etc/prometheus/rules.\n"
    )
    return render(
        cfg,
        COMPOSE_TARGETS,
        COMPOSE_RULE_FILES,
        alertmanagers=COMPOSE_TARGETS.alertmanager,
        header=header,
        replica=service,
    )


def compose_files(cfg: MixinConfig) -> dict[str, str]:
    """File name -> text of each compose Prometheus's config (one per service)."""
    return {f"{service}.yml": render_compose(cfg, service) for service in COMPOSE_PROMETHEUS}
