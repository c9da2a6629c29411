"""The asset generator: a data stream template above the built-ins; saved objects reference what
exists (`tokenpulse build --check` holds the committed files to it: tests/stack/test_build.py)."""

from __future__ import annotations

import json

from log_pipeline import assets


def test_template_makes_a_data_stream_above_the_builtin_priority() -> None:
    tmpl = assets.index_template()
    assert tmpl["data_stream"] == {} and tmpl["priority"] > 100
    assert assets.DEFAULT_STREAM.startswith(tmpl["index_patterns"][0].rstrip("*"))
    assert set(tmpl["composed_of"]) == {assets.MAPPINGS_COMPONENT, assets.SETTINGS_COMPONENT}
    assert assets.settings_component()["settings"]["index.lifecycle.name"] == assets.ILM_POLICY
    assert assets.mappings()["dynamic"] is False


def test_saved_objects() -> None:
    objects = assets.kibana_objects()
    by_id = {(o["type"], o["id"]): o for o in objects}
    searches = [o for o in objects if o["type"] == "search"]
    assert {o["id"] for o in searches} == {
        "genai-recent", "genai-low-quality", "genai-errors", "genai-slow", "genai-by-version",
        "genai-canary-vs-stable",
    }  # fmt: skip
    for obj in objects:
        for ref in obj["references"]:
            assert (ref["type"], ref["id"]) in by_id, ref
    for search in searches:
        source = json.loads(search["attributes"]["kibanaSavedObjectMeta"]["searchSourceJSON"])
        assert source["query"]["language"] == "kuery"
        for column in search["attributes"]["columns"]:
            assert column in assets.FIELD_TYPES
    dashboard = by_id[("dashboard", "genai-samples-overview")]
    assert len(json.loads(dashboard["attributes"]["panelsJSON"])) == len(searches)
