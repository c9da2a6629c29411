"""House rules every dashboard must pass, and the metric names the components really export.

Rules: a title, a description and a unit on every panel; legends on every target; stable,
unique UIDs; no datasource other than the `$datasource` variable (Grafana's built-in annotation
store excepted); every metric a query selects is exported by a TokenPulse component.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from monitoring.mixin import config as cfg
from monitoring.mixin.dashboards.queries import annotation_exprs, metric_names, panel_queries
from tokenpulse import paths

ROOT = paths.ROOT
# The exporter README's metric table is contract-tested against what the exporter exposes.
EXPORTER_README = ROOT / "exporter" / "README.md"
# Series Prometheus itself adds for every target.
PROMETHEUS_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}
RUNBOOKS = ROOT / "alerts" / "runbooks"
ALLOWED_DATASOURCE_UIDS = {"${datasource}", "-- Grafana --"}
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def _series_names(name: str, kind: str) -> set[str]:
    return {name + s for s in _SUFFIXES.get(kind, ("",))}


def _registry_names(registry: CollectorRegistry) -> set[str]:
    names: set[str] = set()
    for family in registry.collect():
        names |= _series_names(family.name, family.type)
    return names


def _gateway_metrics() -> Any:
    from serving.gateway.metrics import GatewayMetrics

    # newer gateways take the closed set of model names they serve (label values only)
    if "models" in inspect.signature(GatewayMetrics).parameters:
        return GatewayMetrics(models=("gen",))  # type: ignore[call-arg,unused-ignore]
    return GatewayMetrics()  # type: ignore[call-arg,unused-ignore]


def exported_metrics() -> set[str]:
    """Every series name the model server, gateway, exporter, log pipeline and Prometheus expose."""
    from log_pipeline.metrics import OUTPUTS, ShipperMetrics, SinkMetrics
    from serving.modelserver.metrics import ServingMetrics

    names = set(PROMETHEUS_SERIES)
    names |= _registry_names(_gateway_metrics().registry)
    pipeline = CollectorRegistry(auto_describe=False)
    SinkMetrics(pipeline)
    ShipperMetrics(pipeline, OUTPUTS)
    names |= _registry_names(pipeline)
    serving = ServingMetrics()
    serving.batch_recorded()  # the batching histograms appear after the first batch
    for name, kind in re.findall(r"^# TYPE (\S+) (\w+)$", serving.render(), re.M):
        # TF Serving's counters have no `_total`
        names |= {name} if kind == "counter" else _series_names(name, kind)
    table = re.findall(r"^\| `(tokenpulse_\w+)` \| (\w+) \|", EXPORTER_README.read_text(), re.M)
    for name, kind in table:
        names |= {name} if kind == "counter" else _series_names(name, kind)
    return names


def _datasource_problems(where: str, node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        ds = node.get("datasource")
        if isinstance(ds, dict) and ds.get("uid") not in ALLOWED_DATASOURCE_UIDS:
            yield f"{where}: hard-coded datasource {ds}"
        elif isinstance(ds, str):
            yield f"{where}: datasource given by name {ds!r}"
        for key, value in node.items():
            if key != "datasource":
                yield from _datasource_problems(where, value)
    elif isinstance(node, list):
        for item in node:
            yield from _datasource_problems(where, item)


def _panel_problems(uid: str, panel: Mapping[str, Any]) -> Iterable[str]:
    title = panel.get("title", "")
    where = f"{uid} / {title or panel.get('id')}"
    if not title:
        yield f"{where}: no title"
    if panel.get("type") == "row":
        return
    if not panel.get("description"):
        yield f"{where}: no description"
    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    if not defaults.get("unit"):
        yield f"{where}: no unit"
    if not defaults.get("thresholds", {}).get("steps"):
        yield f"{where}: no thresholds"
    if not panel.get("targets"):
        yield f"{where}: no query"
    for target in panel.get("targets", []):
        if not target.get("legendFormat"):
            yield f"{where}: query {target.get('refId')} has no legend"
    before, _, after = cfg.RUNBOOK_URL_PATTERN.partition("{alertname}")
    for link in panel.get("links", []):
        url = link.get("url", "")
        if url.startswith(before) and url.endswith(after):
            alert = url[len(before) : len(url) - len(after)]
            if not (RUNBOOKS / f"{alert}.md").is_file():
                yield f"{where}: links a runbook that does not exist: {alert}"
    if panel.get("type") == "timeseries" and not panel.get("options", {}).get("legend", {}).get(
        "showLegend"
    ):
        yield f"{where}: legend hidden"


def lint(models: Mapping[str, Mapping[str, Any]], known: set[str]) -> list[str]:
    """Problems found in the dashboards (file name -> model); empty when all rules hold."""
    problems: list[str] = []
    uids = [m.get("uid", "") for m in models.values()]
    for name, model in models.items():
        uid = model.get("uid", "")
        if not uid or uids.count(uid) > 1:
            problems.append(f"{name}: missing or duplicate uid {uid!r}")
        if name != f"{uid}.json":
            problems.append(f"{name}: file name does not match uid {uid!r}")
        if not model.get("title") or not model.get("tags"):
            problems.append(f"{name}: no title or no tags")
        if "datasource" not in [v["name"] for v in model.get("templating", {}).get("list", [])]:
            problems.append(f"{name}: no datasource variable")
        problems.extend(_datasource_problems(uid, model))
        for panel in model.get("panels", []):
            problems.extend(_panel_problems(uid, panel))
        exprs = [q.expr for q in panel_queries(model)] + annotation_exprs(model)
        for expr in exprs:
            for metric in sorted(metric_names(expr) - known):
                problems.append(f"{uid}: {metric} is not exported by any component")
    return problems
