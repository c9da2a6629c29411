"""House rules every dashboard must pass.

Rules: a title, a description and a unit on every panel; legends on every target; stable,
unique UIDs; no datasource other than the `$datasource` variable (Grafana's built-in annotation
store excepted). Whether every metric a query selects is declared by a component is checked with
the rules and runbooks, against the stack's metric catalogue (monitoring.mixin.references).

Dead selectors and legends, as far as the JSON shows them: a variable the dashboard does not
define (Grafana sends `$version` literally, which matches nothing); a multi-value variable matched
with `=` (its All value `.*` is then a literal); a legend naming a label that the query's
aggregations drop (every series gets the same empty legend). `label_problems` also needs the
labels each metric carries (the caller gathers them from the components): a selector on a label
its metric lacks, such as `$version` on the version-less queue wait, matches nothing once a
value is chosen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from tokenpulse import paths

RUNBOOKS = paths.ALERTS / "runbooks"
ALLOWED_DATASOURCE_UIDS = {"${datasource}", "-- Grafana --"}
# Grafana's own variables: `$__rate_interval`, `${__from:date:iso}`, `${__value.raw}`, ...
_VARIABLE = re.compile(r"\$\{?([A-Za-z_]\w*)")
_EXACT = re.compile(r'(\w+)\s*!?=\s*"\$\{?(\w+)')
_AGGREGATION = re.compile(
    r"\b(sum|min|max|avg|count|stddev|stdvar|group|topk|bottomk|quantile|count_values)\b\s*"
    r"(?:(by|without)\s*\(([^)]*)\))?\s*\("
)
# label_replace(v, "dst", "replacement", "src", "regex"): the dst label is added
_REPLACED = re.compile(r'"(\w+)"\s*,\s*"[^"]*"\s*,\s*"\w*"\s*,\s*"')
_LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def _kept_labels(expr: str) -> set[str] | None:
    """Labels the result of `expr` can carry, when its aggregations say (None: unknown)."""
    kept: set[str] = set()
    aggregations = list(_AGGREGATION.finditer(expr))
    if not aggregations:
        return None  # plain selectors keep every label
    for m in aggregations:
        if m.group(2) == "without":
            return None
        kept |= {label.strip() for label in (m.group(3) or "").split(",") if label.strip()}
    return kept | set(_REPLACED.findall(expr))


def _variable_problems(where: str, text: str, defined: set[str], multi: set[str]) -> Iterable[str]:
    for name in sorted(set(_VARIABLE.findall(text)) - defined):
        if not name.startswith("__"):
            yield f"{where}: uses ${name}, which the dashboard does not define (matches nothing)"
    for label, name in _EXACT.findall(text):
        if name in multi:
            yield f"{where}: matches {label} with = on multi-value ${name} (use =~)"


def _dead_problems(uid: str, model: Mapping[str, Any]) -> Iterable[str]:
    variables = model.get("templating", {}).get("list", [])
    defined = {v["name"] for v in variables}
    multi = {v["name"] for v in variables if v.get("multi") or v.get("includeAll")}
    for v in variables:
        yield from _variable_problems(f"{uid} / variable {v['name']}", str(v.get("query", "")),
                                      defined, multi)  # fmt: skip
    for a in model.get("annotations", {}).get("list", []):
        yield from _variable_problems(f"{uid} / annotation {a.get('name')}", a.get("expr") or "",
                                      defined, multi)  # fmt: skip
    for panel in model.get("panels", []):
        where = f"{uid} / {panel.get('title') or panel.get('id')}"
        texts = [panel.get("description", "")] + [
            lk.get("url", "") for lk in panel.get("links", [])
        ]
        for target in panel.get("targets", []):
            expr, legend = target.get("expr", ""), target.get("legendFormat", "")
            texts.append(expr)
            kept = _kept_labels(expr)
            for label in _LEGEND_LABEL.findall(legend):
                if kept is not None and label not in kept:
                    yield f"{where}: legend names {label}, which query {target.get('refId')} drops"
        for text in texts:
            yield from _variable_problems(where, text, defined, multi)


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


def _panel_problems(uid: str, panel: Mapping[str, Any], runbooks: str) -> Iterable[str]:
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
    before, _, after = runbooks.partition("{alertname}")
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


def lint(models: Mapping[str, Mapping[str, Any]], runbooks: str) -> list[str]:
    """Problems found in the dashboards (file name -> model) whose runbook links follow the
    pattern `runbooks` ({alertname} replaced); empty when all rules hold."""
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
        problems.extend(_dead_problems(uid, model))
        for panel in model.get("panels", []):
            problems.extend(_panel_problems(uid, panel, runbooks))
    return problems


_SELECTOR = re.compile(r"([a-zA-Z_:][\w:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"')


def label_problems(
    models: Mapping[str, Mapping[str, Any]], labels: Mapping[str, set[str]], target_labels: set[str]
) -> list[str]:
    """Selectors that match on a label their metric never carries: with any value chosen (a
    model, a version) they match nothing. `labels` maps a series name to its labels as the
    component declares them; Prometheus adds `target_labels` to every scraped series. Series
    `labels` does not know (recorded, Prometheus' own) are left alone."""
    problems = []
    for model in models.values():
        for panel in model.get("panels", []):
            for target in panel.get("targets", []):
                for metric, matchers in _SELECTOR.findall(target.get("expr", "")):
                    if metric not in labels:
                        continue
                    carried = labels[metric] | target_labels
                    for label, op in _MATCHER.findall(matchers):
                        if op in ("=", "=~") and label not in carried:
                            problems.append(
                                f"{model.get('uid')} / {panel.get('title')}: {metric} has no "
                                f"label {label}: the selector matches nothing once one is chosen"
                            )
    return problems
