"""Elasticsearch and Kibana assets for the samples data stream, built here and committed as files.

`tokenpulse build` rewrites `log_pipeline/assets/` from `files()`, and `tokenpulse build --check`
fails when the committed files drift from this module. `tokenpulse es setup` installs them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ASSETS_DIR = Path(__file__).with_name("assets")
STREAM_PREFIX = "genai-samples"
PATTERN = f"{STREAM_PREFIX}-*"
DEFAULT_STREAM = f"{STREAM_PREFIX}-default"
ILM_POLICY = STREAM_PREFIX
SETTINGS_COMPONENT = f"{STREAM_PREFIX}@settings"
MAPPINGS_COMPONENT = f"{STREAM_PREFIX}@mappings"
INDEX_TEMPLATE = STREAM_PREFIX
DATA_VIEW_ID = STREAM_PREFIX
KIBANA_MIN_MAJOR = 9

KW = {"type": "keyword", "ignore_above": 1024}
TEXT = {"type": "match_only_text", "fields": {"wildcard": {"type": "wildcard"}}}

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
    "error.type": "keyword",
    "gen_ai.operation.name": "keyword",
    "gen_ai.provider.name": "keyword",
    "gen_ai.request.model": "keyword",
    "gen_ai.request.max_tokens": "integer",
    "gen_ai.request.temperature": "float",
    "gen_ai.request.top_p": "float",
    "gen_ai.request.top_k": "integer",
    "gen_ai.request.seed": "long",
    "gen_ai.response.id": "keyword",
    "gen_ai.response.model": "keyword",
    "gen_ai.response.finish_reasons": "keyword",
    "gen_ai.usage.input_tokens": "integer",
    "gen_ai.usage.output_tokens": "integer",
    "genai_sample.request_id": "keyword",
    "genai_sample.index": "integer",
    "genai_sample.route": "keyword",
    "genai_sample.model": "keyword",
    "genai_sample.version": "keyword",
    "genai_sample.version_label": "keyword",
    "genai_sample.key_id": "keyword",
    "genai_sample.status": "short",
    "genai_sample.prompt.text": "match_only_text",
    "genai_sample.output.text": "match_only_text",
    "genai_sample.timings.queue_wait_s": "float",
    "genai_sample.timings.upstream_s": "float",
    "genai_sample.timings.total_s": "float",
    "genai_sample.timings.time_per_output_token_s": "float",
    "genai_sample.quality.finish_reason": "keyword",
    "genai_sample.quality.empty": "boolean",
    "genai_sample.quality.repetition_ratio": "float",
    "genai_sample.quality.mean_nll": "float",
    "genai_sample.quality.truncated": "boolean",
    "genai_sample.quality.truncated_prompt_tokens": "integer",
    "genai_sample.sampling.reason": "keyword",
    "genai_sample.sampling.reasons": "keyword",
    "genai_sample.sampling.head_rate": "float",
    "genai_sample.redaction.total": "integer",
    "genai_sample.redaction.kinds": "flattened",
}


def _mapping_of(kind: str) -> dict[str, Any]:
    if kind == "keyword":
        return dict(KW)
    if kind == "match_only_text":
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
    """Index settings shared by the backing indices."""
    return {"settings": {"index.lifecycle.name": ILM_POLICY, "index.number_of_replicas": 0}}


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


def _search(
    sid: str, title: str, query: str, columns: list[str], sort: list[list[str]]
) -> dict[str, Any]:
    source = {"query": {"query": query, "language": "kuery"}, "filter": [],
              "indexRefName": "kibanaSavedObjectMeta.searchSourceJSON.index"}  # fmt: skip
    return {
        "type": "search",
        "id": sid,
        "attributes": {
            "title": title,
            "columns": columns,
            "sort": sort,
            "kibanaSavedObjectMeta": {"searchSourceJSON": json.dumps(source)},
        },
        "references": [{"name": "kibanaSavedObjectMeta.searchSourceJSON.index",
                        "type": "index-pattern", "id": DATA_VIEW_ID}],
    }  # fmt: skip


BASE_COLUMNS = ["genai_sample.model", "genai_sample.version", "genai_sample.quality.finish_reason",
                "genai_sample.quality.mean_nll", "genai_sample.sampling.reasons",
                "genai_sample.prompt.text", "genai_sample.output.text"]  # fmt: skip
NEWEST = [["@timestamp", "desc"]]
SEARCHES = [
    ("genai-recent", "GenAI samples: recent", ""),
    ("genai-low-quality", "GenAI samples: low quality",
     'genai_sample.sampling.reasons : "low_quality"'),
    ("genai-errors", "GenAI samples: errors", 'event.outcome : "failure"'),
    ("genai-slow", "GenAI samples: slow", 'genai_sample.sampling.reasons : "slow"'),
    ("genai-by-version", "GenAI samples: by version", "genai_sample.version : *"),
    ("genai-canary-vs-stable", "GenAI samples: canary vs stable",
     'genai_sample.version_label : ("canary" or "stable")'),
]  # fmt: skip


def kibana_objects() -> list[dict[str, Any]]:
    """Data view, saved searches and a dashboard, as saved objects."""
    objects: list[dict[str, Any]] = [{
        "type": "index-pattern", "id": DATA_VIEW_ID,
        "attributes": {"title": PATTERN, "timeFieldName": "@timestamp", "name": "GenAI samples"},
        "references": [],
    }]  # fmt: skip
    for sid, title, query in SEARCHES:
        columns = list(BASE_COLUMNS)
        sort = NEWEST
        if sid == "genai-by-version":
            sort = [["genai_sample.version", "desc"], ["@timestamp", "desc"]]
        if sid == "genai-canary-vs-stable":
            columns.insert(2, "genai_sample.version_label")
        objects.append(_search(sid, title, query, columns, sort))
    panels, refs = [], []
    for i, (sid, _title, _query) in enumerate(SEARCHES):
        ref = f"panel_{i}"
        panels.append({"type": "search", "panelIndex": str(i), "panelRefName": ref,
                       "gridData": {"x": (i % 2) * 24, "y": (i // 2) * 15, "w": 24, "h": 15,
                                    "i": str(i)}, "embeddableConfig": {}})  # fmt: skip
        refs.append({"name": ref, "type": "search", "id": sid})
    objects.append({
        "type": "dashboard", "id": "genai-samples-overview",
        "attributes": {
            "title": "GenAI samples overview",
            "description": "Sampled generations: recent, low quality, errors, slow, by version, "
                           "canary vs stable",
            "panelsJSON": json.dumps(panels),
            "timeRestore": True, "timeFrom": "now-24h", "timeTo": "now",
            "kibanaSavedObjectMeta": {"searchSourceJSON": json.dumps(
                {"query": {"query": "", "language": "kuery"}, "filter": []})},
        },
        "references": refs,
    })  # fmt: skip
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
