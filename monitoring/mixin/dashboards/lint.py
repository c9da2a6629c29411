"""House rules every dashboard must pass.

Rules: a title, a description and a unit on every panel; legends on every target; stable,
unique UIDs; no datasource other than the `$datasource` variable (Grafana's built-in annotation
store excepted). Whether every metric a query selects is declared by a component is checked with
the rules and runbooks, against the stack's metric catalogue (monitoring.mixin.references).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from monitoring.mixin import config as cfg
from tokenpulse import paths

RUNBOOKS = paths.ALERTS / "runbooks"
ALLOWED_DATASOURCE_UIDS = {"${datasource}", "-- Grafana --"}


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


def lint(models: Mapping[str, Mapping[str, Any]]) -> list[str]:
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
    return problems
