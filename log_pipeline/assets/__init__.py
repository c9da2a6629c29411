"""Elasticsearch and Kibana assets for the samples data stream, built here and committed as files.

The package is the assets: this module defines them, and `tokenpulse build` writes them beside it
(the JSON and NDJSON files of this folder) from `files()`; `tokenpulse build --check` fails when
the committed files drift from this module. `tokenpulse es setup` installs them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from log_pipeline.analysis import ANALYZER, es_analysis
from tokenpulse.samples import DATA_VIEW_ID, STREAM_PREFIX

ASSETS_DIR = Path(__file__).parent
PATTERN = f"{STREAM_PREFIX}-*"
DEFAULT_STREAM = f"{STREAM_PREFIX}-default"
ILM_POLICY = STREAM_PREFIX
SETTINGS_COMPONENT = f"{STREAM_PREFIX}@settings"
MAPPINGS_COMPONENT = f"{STREAM_PREFIX}@mappings"
INDEX_TEMPLATE = STREAM_PREFIX

KW = {"type": "keyword", "ignore_above": 1024}
# prompt and output: analyzed by log_pipeline.analysis (every Chinese character a token), with
# positions so a word of several characters is a fast phrase query; a wildcard subfield for
# Kibana's `*...*` queries
TEXT = {"type": "text", "analyzer": ANALYZER, "index_options": "positions", "norms": False,
        "fields": {"wildcard": {"type": "wildcard"}}}  # fmt: skip

# field -> Elasticsearch type; SCHEMA.md lists the same fields (a test holds them together)
FIELD_TYPES: dict[str, str] = {
    "@timestamp": "date",
    "message": "match_only_text",
    "event.id": "keyword",
    "event.kind": "keyword",
    "event.dataset": "keyword",
    "event.outcome": "keyword",
    "event.duration": "long",
    "event.start": "date",
    "service.name": "keyword",
    "trace.id": "keyword",
    "ecs.version": "keyword",
    "http.response.status_code": "long",
    "error.type": "keyword",
    "gen_ai.operation.name": "keyword",
    "gen_ai.provider.name": "keyword",
    "gen_ai.request.model": "keyword",
    "gen_ai.request.max_tokens": "integer",
    "gen_ai.request.temperature": "float",
    "gen_ai.request.top_p": "float",
    "gen_ai.request.top_k": "double",
    "gen_ai.request.stop_sequences": "keyword",
    "gen_ai.request.seed": "long",
    "gen_ai.response.id": "keyword",
    "gen_ai.response.model": "keyword",
    "gen_ai.response.finish_reasons": "keyword",
    "gen_ai.usage.input_tokens": "integer",
    "gen_ai.usage.output_tokens": "integer",
    "gen_ai.server.time_to_first_token": "double",
    "genai_sample.request_id": "keyword",
    "genai_sample.index": "integer",
    "genai_sample.route": "keyword",
    "genai_sample.model": "keyword",
    "genai_sample.version": "keyword",
    "genai_sample.version_number": "long",
    "genai_sample.version_label": "keyword",
    "genai_sample.key_id": "keyword",
    "genai_sample.prompt.text": "text",
    "genai_sample.output.text": "text",
    "genai_sample.timings.queue_wait_s": "double",
    "genai_sample.timings.upstream_s": "double",
    "genai_sample.timings.total_s": "double",
    "genai_sample.timings.time_per_output_token_s": "double",
    "genai_sample.timings.chunks": "integer",
    "genai_sample.quality.finish_reason": "keyword",
    "genai_sample.quality.empty": "boolean",
    "genai_sample.quality.repetition_ratio": "float",
    "genai_sample.quality.mean_nll": "double",
    "genai_sample.quality.truncated": "boolean",
    "genai_sample.quality.truncated_prompt_tokens": "integer",
    "genai_sample.sampling.reason": "keyword",
    "genai_sample.sampling.reasons": "keyword",
    "genai_sample.sampling.head_rate": "float",
    "genai_sample.feedback.response_id": "keyword",
    "genai_sample.feedback.score": "double",
    "genai_sample.feedback.scale": "keyword",
    "genai_sample.feedback.value": "double",
    "genai_sample.feedback.class": "keyword",
    "genai_sample.feedback.comment": "text",
    "genai_sample.feedback.key_id": "keyword",
    "genai_sample.feedback.time": "date",
    "genai_sample.feedback.outcome": "keyword",
    "genai_sample.kind": "keyword",
    "genai_sample.redaction.total": "integer",
    "genai_sample.redaction.kinds": "flattened",
}


def _mapping_of(kind: str) -> dict[str, Any]:
    if kind == "keyword":
        return dict(KW)
    if kind == "text":
        return dict(TEXT)
    return {"type": kind}


def mappings() -> dict[str, Any]:
    """Explicit mappings; `dynamic: false` keeps unknown fields in _source without rejecting."""
    root: dict[str, Any] = {}
    for path, kind in FIELD_TYPES.items():
        node = root
        parts = path.split(".") if path != "@timestamp" else [path]
        for part in parts[:-1]:
            node = node.setdefault(part, {"properties": {}})["properties"]
        node[parts[-1]] = _mapping_of(kind)
    return {"dynamic": False, "properties": root}


def ilm_policy() -> dict[str, Any]:
    """Roll over daily or at 50 GB a primary shard; delete after 30 days."""
    return {"phases": {
        "hot": {"actions": {"rollover": {"max_primary_shard_size": "50gb", "max_age": "1d"}}},
        "delete": {"min_age": "30d", "actions": {"delete": {}}},
    }}  # fmt: skip


def settings_component() -> dict[str, Any]:
    """Index settings shared by the backing indices, with the text analyzer."""
    return {"settings": {"index.lifecycle.name": ILM_POLICY, "index.number_of_replicas": 0,
                         "analysis": es_analysis()}}  # fmt: skip


def index_template() -> dict[str, Any]:
    """The composable template that makes genai-samples-* a data stream (priority above the
    built-in logs-*-* at 100)."""
    return {
        "index_patterns": [PATTERN],
        "data_stream": {},
        "composed_of": [MAPPINGS_COMPONENT, SETTINGS_COMPONENT],
        "priority": 500,
        "_meta": {"managed_by": "tokenpulse", "description": "sampled generation records"},
    }


# Saved objects carry the migration versions of the format they are written in, the oldest that
# has every attribute used here (Kibana 8.9): Kibana migrates them forward on import (9.x does),
# and refuses an object whose version is newer than it knows (so 8.9 to 8.x and 9.x import them).
CORE_MIGRATION_VERSION = "8.8.0"
TYPE_MIGRATION_VERSIONS = {
    "index-pattern": "8.0.0",
    "search": "8.0.0",
    "lens": "8.9.0",
    "dashboard": "8.9.0",
}
KIBANA_MIN_VERSION = (8, 9)


def kibana_version(number: str) -> tuple[int, int]:
    """A version string's (major, minor); (0, 0) when it is not one."""
    parts = number.split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return 0, 0


SOURCE_REF = "kibanaSavedObjectMeta.searchSourceJSON.index"


def _saved(
    kind: str, oid: str, attributes: dict[str, Any], refs: list[dict[str, str]]
) -> dict[str, Any]:
    """A saved object with its migration versions."""
    return {"type": kind, "id": oid, "attributes": attributes, "references": refs,
            "coreMigrationVersion": CORE_MIGRATION_VERSION,
            "typeMigrationVersion": TYPE_MIGRATION_VERSIONS[kind], "managed": False}  # fmt: skip


def _search(
    sid: str, title: str, query: str, columns: list[str], sort: list[list[str]]
) -> dict[str, Any]:
    source = {"query": {"query": query, "language": "kuery"}, "filter": [],
              "indexRefName": SOURCE_REF}  # fmt: skip
    return _saved("search", sid, {
        "title": title, "description": "", "columns": columns, "sort": sort, "grid": {},
        "hideChart": False, "isTextBasedQuery": False,
        "kibanaSavedObjectMeta": {"searchSourceJSON": json.dumps(source)},
    }, [{"name": SOURCE_REF, "type": "index-pattern", "id": DATA_VIEW_ID}])  # fmt: skip


# every saved search shows who asked (key id) and which request it was (request id)
WHO = ["genai_sample.key_id", "genai_sample.request_id"]
TEXTS = ["genai_sample.prompt.text", "genai_sample.output.text"]
DEPLOYMENT = ["genai_sample.model", "genai_sample.version"]
QUALITY = ["genai_sample.quality.finish_reason", "genai_sample.quality.mean_nll"]
TIMINGS = [f"genai_sample.timings.{t}" for t in ("total_s", "upstream_s", "queue_wait_s",
                                                 "time_per_output_token_s", "chunks")]  # fmt: skip
NEWEST = [["@timestamp", "desc"]]
# (id, title, KQL, columns, sort)
SEARCHES: list[tuple[str, str, str, list[str], list[list[str]]]] = [
    ("genai-recent", "GenAI samples: recent", "",
     [*DEPLOYMENT, *QUALITY, "genai_sample.sampling.reasons", *WHO, *TEXTS], NEWEST),
    ("genai-low-quality", "GenAI samples: low quality",
     'genai_sample.sampling.reasons : "low_quality"',
     [*DEPLOYMENT, *QUALITY, "genai_sample.quality.repetition_ratio", *WHO, *TEXTS], NEWEST),
    ("genai-errors", "GenAI samples: errors", 'event.outcome : "failure"',
     ["error.type", "http.response.status_code", "genai_sample.route", *DEPLOYMENT, *WHO,
      "genai_sample.prompt.text"], NEWEST),
    ("genai-slow", "GenAI samples: slow", 'genai_sample.sampling.reasons : "slow"',
     [*TIMINGS, "gen_ai.usage.output_tokens", *DEPLOYMENT, *WHO, "genai_sample.prompt.text"],
     [["genai_sample.timings.total_s", "desc"]]),
    ("genai-by-version", "GenAI samples: by version", "genai_sample.version : *",
     [*DEPLOYMENT, "genai_sample.version_label", *QUALITY, "genai_sample.timings.total_s", *WHO,
      *TEXTS], [["genai_sample.version_number", "desc"], ["@timestamp", "desc"]]),
    ("genai-canary-vs-stable", "GenAI samples: canary vs stable",
     'genai_sample.version_label : ("canary" or "stable")',
     ["genai_sample.version_label", *DEPLOYMENT, *QUALITY, "genai_sample.timings.total_s", *WHO,
      *TEXTS], NEWEST),
]  # fmt: skip


def _column(label: str, op: str, field: str = "", **params: Any) -> dict[str, Any]:
    """One Lens (form-based) column."""
    bucketed = op in ("date_histogram", "terms", "range", "filters")
    kind = {"date_histogram": "date", "terms": "string"}.get(op, "number")
    col: dict[str, Any] = {"label": label, "customLabel": True, "dataType": kind,
                           "operationType": op, "isBucketed": bucketed,
                           "scale": {"date_histogram": "interval", "terms": "ordinal",
                                     "range": "interval"}.get(op, "ratio"),
                           "sourceField": field or "___records___"}  # fmt: skip
    if op == "terms" and field == "http.response.status_code":
        col["dataType"] = "number"
    if params:
        col["params"] = params
    return col


def _time(label: str = "@timestamp") -> dict[str, Any]:
    return _column(label, "date_histogram", "@timestamp", interval="auto", includeEmptyRows=True,
                   dropPartials=False)  # fmt: skip


def _terms(label: str, field: str, size: int = 10) -> dict[str, Any]:
    return _column(label, "terms", field, size=size, orderBy={"type": "column", "columnId": "y"},
                   orderDirection="desc", otherBucket=True, missingBucket=False)  # fmt: skip


def _histogram(label: str, field: str) -> dict[str, Any]:
    return _column(label, "range", field, type="histogram", maxBars="auto", includeEmptyRows=True,
                   ranges=[{"from": 0, "to": 1000, "label": ""}])  # fmt: skip


# (id, title, chart, {column id: column}, KQL): x, y and an optional split ("split")
LENSES: list[tuple[str, str, str, dict[str, dict[str, Any]], str]] = [
    ("genai-volume-by-model", "Samples over time by model", "bar_stacked",
     {"x": _time(), "y": _column("Samples", "count"), "split": _terms("Model",
                                                                     "genai_sample.model")}, ""),
    ("genai-volume-by-version", "Samples over time by version", "bar_stacked",
     {"x": _time(), "y": _column("Samples", "count"),
      "split": _terms("Version", "genai_sample.version")}, ""),
    ("genai-volume-by-finish-reason", "Samples over time by finish reason", "bar_stacked",
     {"x": _time(), "y": _column("Samples", "count"),
      "split": _terms("Finish reason", "genai_sample.quality.finish_reason")}, ""),
    ("genai-nll-distribution", "Mean NLL distribution", "bar",
     {"x": _histogram("Mean NLL (nats)", "genai_sample.quality.mean_nll"),
      "y": _column("Samples", "count")}, ""),
    ("genai-latency-distribution", "Latency distribution", "bar",
     {"x": _histogram("Total seconds", "genai_sample.timings.total_s"),
      "y": _column("Samples", "count")}, ""),
    ("genai-canary-nll", "Canary against stable: mean NLL", "line",
     {"x": _time(), "y": _column("Mean NLL", "average", "genai_sample.quality.mean_nll"),
      "split": _terms("Label", "genai_sample.version_label", 5)},
     'genai_sample.version_label : ("canary" or "stable")'),
    ("genai-canary-latency", "Canary against stable: p95 latency", "line",
     {"x": _time(), "y": _column("p95 total seconds", "percentile",
                                 "genai_sample.timings.total_s", percentile=95),
      "split": _terms("Label", "genai_sample.version_label", 5)},
     'genai_sample.version_label : ("canary" or "stable")'),
    ("genai-top-errors", "Top error types", "bar_horizontal",
     {"x": _terms("Error type", "error.type", 10), "y": _column("Samples", "count")},
     'event.outcome : "failure"'),
]  # fmt: skip
LAYER = "layer-0"


def _lens(
    lid: str, title: str, chart: str, columns: dict[str, dict[str, Any]], query: str
) -> dict[str, Any]:
    """A Lens XY chart over the data view: x, y and an optional split."""
    layer: dict[str, Any] = {"layerId": LAYER, "layerType": "data", "seriesType": chart,
                             "xAccessor": "x", "accessors": ["y"]}  # fmt: skip
    if "split" in columns:
        layer["splitAccessor"] = "split"
    order = ["x", "split", "y"] if "split" in columns else ["x", "y"]
    state = {
        "visualization": {"legend": {"isVisible": True, "position": "right"},
                          "valueLabels": "hide", "preferredSeriesType": chart,
                          "layers": [layer]},
        "query": {"query": query, "language": "kuery"}, "filters": [],
        "datasourceStates": {"formBased": {"layers": {LAYER: {
            "columns": columns, "columnOrder": order, "incompleteColumns": {}, "sampling": 1}}}},
        "internalReferences": [], "adHocDataViews": {},
    }  # fmt: skip
    return _saved("lens", lid, {"title": title, "description": "", "visualizationType": "lnsXY",
                                "state": state},
                  [{"type": "index-pattern", "id": DATA_VIEW_ID,
                    "name": f"indexpattern-datasource-layer-{LAYER}"}])  # fmt: skip


# the dashboard's controls: (control id, field, title)
CONTROLS = [("control-model", "genai_sample.model", "Model"),
            ("control-version", "genai_sample.version", "Version")]  # fmt: skip
DASHBOARD_ID = "genai-samples-overview"


def _controls() -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The dashboard's control group (an options list per field) and its references."""
    panels, refs = {}, []
    for order, (cid, field, title) in enumerate(CONTROLS):
        panels[cid] = {"order": order, "width": "medium", "grow": True,
                       "type": "optionsListControl",
                       "explicitInput": {"id": cid, "fieldName": field, "title": title,
                                         "selectedOptions": [], "singleSelect": False,
                                         "enhancements": {}}}  # fmt: skip
        refs.append({"name": f"controlGroup_{cid}:optionsListDataView", "type": "index-pattern",
                     "id": DATA_VIEW_ID})  # fmt: skip
    ignore = {"ignoreFilters": False, "ignoreQuery": False, "ignoreTimerange": False,
              "ignoreValidations": False}  # fmt: skip
    group = {"controlStyle": "oneLine", "chainingSystem": "HIERARCHICAL",
             "showApplySelections": False, "panelsJSON": json.dumps(panels),
             "ignoreParentSettingsJSON": json.dumps(ignore)}  # fmt: skip
    return group, refs


def kibana_objects() -> list[dict[str, Any]]:
    """Data view, saved searches, Lens charts and a dashboard with controls, as saved objects."""
    objects: list[dict[str, Any]] = [_saved("index-pattern", DATA_VIEW_ID, {
        "title": PATTERN, "timeFieldName": "@timestamp", "name": "GenAI samples",
        "fieldFormatMap": json.dumps({"genai_sample.timings.total_s": {
            "id": "number", "params": {"pattern": "0,0.[000]"}}}),
    }, [])]  # fmt: skip
    objects += [_search(*spec) for spec in SEARCHES]
    objects += [_lens(*spec) for spec in LENSES]
    panels, refs = [], []
    placed = [("lens", lid, 16, 10) for lid, *_rest in LENSES]
    placed += [("search", sid, 24, 15) for sid, *_rest in SEARCHES if sid in (
        "genai-errors", "genai-slow", "genai-canary-vs-stable", "genai-recent")]  # fmt: skip
    x = y = row = 0
    for i, (kind, oid, w, h) in enumerate(placed):
        if x + w > 48:
            x, y = 0, y + row
        pid = f"p{i}"
        panels.append({"version": "8.9.0", "type": kind, "panelIndex": pid,
                       "gridData": {"x": x, "y": y, "w": w, "h": h, "i": pid},
                       "embeddableConfig": {"enhancements": {}},
                       "panelRefName": f"panel_{pid}"})  # fmt: skip
        refs.append({"name": f"{pid}:panel_{pid}", "type": kind, "id": oid})
        x, row = x + w, h
    group, control_refs = _controls()
    objects.append(_saved("dashboard", DASHBOARD_ID, {
        "title": "GenAI samples overview",
        "description": "Sample volume by model, version and finish reason; NLL and latency "
                       "distributions; canary against stable; top error types; the saved searches",
        "panelsJSON": json.dumps(panels),
        "optionsJSON": json.dumps({"useMargins": True, "syncColors": True, "syncCursor": True,
                                   "syncTooltips": False, "hidePanelTitles": False}),
        "controlGroupInput": group,
        "timeRestore": True, "timeFrom": "now-24h", "timeTo": "now",
        "refreshInterval": {"pause": True, "value": 60000},
        "version": 1,
        "kibanaSavedObjectMeta": {"searchSourceJSON": json.dumps(
            {"query": {"query": "", "language": "kuery"}, "filter": []})},
    }, refs + control_refs))  # fmt: skip
    return objects


def ndjson(objects: list[dict[str, Any]]) -> str:
    """Saved objects as NDJSON (one object a line)."""
    return "".join(json.dumps(o, sort_keys=True) + "\n" for o in objects)


def files() -> dict[str, str]:
    """Every committed asset file by name, with its content."""
    dump = lambda obj: json.dumps(obj, indent=2, sort_keys=True) + "\n"  # noqa: E731
    return {
        "ilm-policy.json": dump({"policy": ilm_policy()}),
        "component-settings.json": dump({"template": settings_component()}),
        "component-mappings.json": dump({"template": {"mappings": mappings()}}),
        "index-template.json": dump(index_template()),
        "kibana.ndjson": ndjson(kibana_objects()),
    }
