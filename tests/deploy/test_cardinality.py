"""The cardinality budget in deploy/k8s/README.md: series per replica of each component, and at
N replicas, computed from the metric catalogue's components with stated label assumptions."""

from __future__ import annotations

import math
import re
from itertools import product

from prometheus_client import (
    CollectorRegistry,
    disable_created_metrics,
    enable_created_metrics,
    generate_latest,
)
from prometheus_client import metrics as prometheus_metrics
from prometheus_client.metrics import MetricWrapperBase

from log_pipeline.metrics import ShipperMetrics, SinkMetrics
from serving.gateway.metrics import GatewayMetrics
from serving.modelserver.metrics import ServingMetrics
from stack import catalogue
from tests.deploy.conftest import K8S
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME
from tokenpulse.tfserving.status import VERSION_STATES

REPLICAS = (1, 2, 4, 8)
GPUS_PER_NODE = 8
# Label values assumed per replica: one model, two versions live during a canary rollout, the
# gateway's three generation routes (streamed or unary), six status codes seen in a day, both
# finish reasons plus __unknown__.
GATEWAY_VALUES: dict[str, list[str]] = {
    "model": [DEFAULT_MODEL_NAME],
    "version": ["1", "2"],
    "route": ["generate", "completions", "chat"],
    "mode": ["stream", "unary"],
    "code": ["200", "400", "401", "429", "500", "503"],
    "finish_reason": ["stop", "length", "__unknown__"],
}
# The exporter's label values per node (DaemonSet) or per replica (sidecar): `gpu` is per GPU,
# the GPU's identity labels follow it; throttle reasons and policies as NVML reports them.
EXPORTER_VALUES = {
    "gpu": GPUS_PER_NODE, "model": 1, "version": 2, "state": len(VERSION_STATES), "label": 2,
    "collector": 3, "result": 3, "reason": 8, "policy": 6, "type": 2, "cause": 2,
    "direction": 2, "xid": 1, "pid": 1,
}  # fmt: skip
# Prometheus' own series per scraped target: up and the scrape_* series.
PER_TARGET = len(catalogue.PROMETHEUS_SERIES - {"ALERTS", "ALERTS_FOR_STATE"})


def _samples(registry: CollectorRegistry, created: bool) -> int:
    """Sample lines on the page, with `_created` series as the process shows them: the gateway
    (and its writer) turn them off at start-up, the shipper keeps them. The switch is global in
    prometheus_client, so it is set here, whatever another test left it at."""
    before = prometheus_metrics._get_use_created()
    (enable_created_metrics if created else disable_created_metrics)()
    try:
        text = generate_latest(registry).decode()
    finally:
        (enable_created_metrics if before else disable_created_metrics)()
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def gateway_series() -> int:
    """One gateway replica: its metrics with every assumed label set, and its spool writer's."""
    metrics = GatewayMetrics(models=GATEWAY_VALUES["model"])
    for model, version in product(GATEWAY_VALUES["model"], GATEWAY_VALUES["version"]):
        metrics.version_available(model, version)  # its closed-set series, at 0
    for metric in vars(metrics).values():
        if isinstance(metric, MetricWrapperBase) and metric._labelnames:
            names = metric._labelnames
            if set(names) <= set(GATEWAY_VALUES):
                for values in product(*(GATEWAY_VALUES[n] for n in names)):
                    metric.labels(*values)
    SinkMetrics(metrics.registry)
    return _samples(metrics.registry, created=False)  # serving/gateway/server.py turns them off


def tfserving_series() -> int:
    """One TF Serving replica serving one model, as the model server declares its metrics."""
    metrics = ServingMetrics()
    metrics.batch_recorded()
    return sum(1 for line in metrics.render().splitlines() if line and not line.startswith("#"))


def shipper_series() -> int:
    """The shipper with its one output, Elasticsearch."""
    registry = CollectorRegistry(auto_describe=False)
    ShipperMetrics(registry, ("elasticsearch",))
    return _samples(registry, created=True)


def exporter_series(gpus: int) -> int:
    """The exporter, from its metric table: a sidecar (gpus=0, NVML off) or a GPU node's."""
    table = catalogue.EXPORTER_README.read_text(encoding="utf-8")
    total = 0
    for name, labels in re.findall(r"^\| `(tokenpulse_\w+)` \| \w+ \| ([\w, ]*) \|", table, re.M):
        keys = [k.strip() for k in labels.split(",") if k.strip()]
        if name.startswith("tokenpulse_gpu_") and name != "tokenpulse_gpu_nvml_available":
            if not gpus:
                continue
        counts = {**EXPORTER_VALUES, "gpu": gpus}
        total += math.prod(counts.get(k, 1) for k in keys)
    return total


def rows() -> list[tuple[str, str, int]]:
    """(component, what scales it, series per unit including Prometheus' per-target series)."""
    return [
        ("TF Serving (`tfserving`)", "replica", tfserving_series() + PER_TARGET),
        ("gateway (`tokenpulse-gateway`, with its spool writer)", "replica",
         gateway_series() + PER_TARGET),
        ("exporter sidecar (both overlays, NVML off)", "TF Serving replica",
         exporter_series(0) + PER_TARGET),
        (f"exporter DaemonSet (GPU overlay, {GPUS_PER_NODE} GPUs a node)", "GPU node",
         exporter_series(GPUS_PER_NODE) + PER_TARGET),
        ("shipper (`tokenpulse-shipper`, the gateway's sidecar)", "gateway replica",
         shipper_series() + PER_TARGET),
    ]  # fmt: skip


def table() -> str:
    """The README's markdown table."""
    head = "| component | per | series per unit | " + " | ".join(f"N={n}" for n in REPLICAS)
    lines = [head + " |", "|---|---|---:|" + "---:|" * len(REPLICAS)]
    for name, unit, series in rows():
        scaled = [series if unit.startswith("fixed") else series * n for n in REPLICAS]
        lines.append(f"| {name} | {unit} | {series} | " + " | ".join(map(str, scaled)) + " |")
    cpu_rows = [(unit, series) for name, unit, series in rows() if "DaemonSet" not in name]
    cpu = [sum(s if u.startswith("fixed") else s * n for u, s in cpu_rows) for n in REPLICAS]
    lines.append("| **CPU overlay, N of each** | | | " + " | ".join(map(str, cpu)) + " |")
    return "\n".join(lines) + "\n"


def test_the_readme_table_is_the_computed_one() -> None:
    readme = (K8S / "README.md").read_text()
    assert table() in readme, "update deploy/k8s/README.md's budget table to:\n" + table()


def test_every_series_counted_is_in_the_catalogue() -> None:
    declared = catalogue.declared_metrics()
    metrics = GatewayMetrics(models=GATEWAY_VALUES["model"])
    SinkMetrics(metrics.registry)
    names = set(re.findall(r"^(\w+)", generate_latest(metrics.registry).decode(), re.M))
    assert {n for n in names if not n.endswith("_created")} <= declared
