"""The asset generator: a data stream template above the built-ins; saved objects reference what
exists (`tokenpulse build --check` holds the committed files to it: tests/stack/test_build.py)."""

from __future__ import annotations

import json
from typing import Any

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
    shown = {p["type"] for p in json.loads(dashboard["attributes"]["panelsJSON"])}
    assert shown == {"lens", "search"}


def test_text_fields_use_the_analyzer_both_stores_share() -> None:
    from log_pipeline import analysis

    props = assets.mappings()["properties"]["genai_sample"]["properties"]
    for part in ("prompt", "output"):
        text = props[part]["properties"]["text"]
        assert text["type"] == "text" and text["analyzer"] == analysis.ANALYZER
        assert text["index_options"] == "positions"  # phrases (Chinese words) from the index
    settings = assets.settings_component()["settings"]["analysis"]
    tokenizer = settings["tokenizer"][settings["analyzer"][analysis.ANALYZER]["tokenizer"]]
    assert tokenizer == {"type": "pattern", "pattern": analysis.JAVA_PATTERN, "group": 0}
    assert props["version_number"] == {"type": "long"}


NDJSON = assets.ASSETS_DIR / "kibana.ndjson"
KNOWN = {"index-pattern", "search", "lens", "dashboard"}


def _objects() -> list[dict[str, Any]]:
    return [json.loads(line) for line in NDJSON.read_text().splitlines()]


def test_the_ndjson_has_what_an_import_needs() -> None:
    objects = _objects()
    assert objects == assets.kibana_objects()
    assert len({(o["type"], o["id"]) for o in objects}) == len(objects)
    least = ".".join(map(str, assets.KIBANA_MIN_VERSION)) + ".0"
    for obj in objects:
        assert {"type", "id", "attributes", "references"} <= set(obj), obj["id"]
        assert obj["type"] in KNOWN and obj["attributes"].get("title")
        # versions Kibana 8.9 knows: it (and every later one, 9.x included) migrates forward
        assert _v(obj["coreMigrationVersion"]) <= _v("8.8.0")
        assert _v(obj["typeMigrationVersion"]) <= _v(least)
        for ref in obj["references"]:
            assert set(ref) == {"name", "type", "id"}


def _v(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def test_every_reference_resolves_and_every_embedded_ref_name_has_one() -> None:
    objects = _objects()
    have = {(o["type"], o["id"]) for o in objects}
    for obj in objects:
        names = {ref["name"] for ref in obj["references"]}
        assert len(names) == len(obj["references"]), obj["id"]
        for ref in obj["references"]:
            assert (ref["type"], ref["id"]) in have, (obj["id"], ref)
        attrs = obj["attributes"]
        if obj["type"] == "search":
            source = json.loads(attrs["kibanaSavedObjectMeta"]["searchSourceJSON"])
            assert source["indexRefName"] in names
        if obj["type"] == "lens":
            for layer in attrs["state"]["datasourceStates"]["formBased"]["layers"]:
                assert f"indexpattern-datasource-layer-{layer}" in names
        if obj["type"] == "dashboard":
            for panel in json.loads(attrs["panelsJSON"]):
                assert f"{panel['panelIndex']}:{panel['panelRefName']}" in names
            controls = json.loads(attrs["controlGroupInput"]["panelsJSON"])
            for cid in controls:
                assert f"controlGroup_{cid}:optionsListDataView" in names


def test_saved_searches_show_their_own_columns() -> None:
    searches = {o["id"]: o["attributes"] for o in _objects() if o["type"] == "search"}
    for attrs in searches.values():
        assert {"genai_sample.key_id", "genai_sample.request_id"} <= set(attrs["columns"])
        assert set(attrs["columns"]) <= set(assets.FIELD_TYPES)
        assert {field for field, _order in attrs["sort"]} <= set(assets.FIELD_TYPES)
    assert {"error.type", "http.response.status_code", "genai_sample.route"} <= set(
        searches["genai-errors"]["columns"]
    )
    assert {f for f in assets.FIELD_TYPES if f.startswith("genai_sample.timings.")} <= set(
        searches["genai-slow"]["columns"]
    )
    assert searches["genai-by-version"]["sort"][0] == ["genai_sample.version_number", "desc"]


def test_the_dashboard_charts_and_controls() -> None:
    objects = _objects()
    lenses = {o["id"]: o["attributes"] for o in objects if o["type"] == "lens"}
    fields = set()
    for attrs in lenses.values():
        (layer,) = attrs["state"]["datasourceStates"]["formBased"]["layers"].values()
        (xy,) = attrs["state"]["visualization"]["layers"]
        accessors = {xy["xAccessor"], *xy["accessors"], xy.get("splitAccessor", xy["xAccessor"])}
        assert accessors == set(layer["columns"]) == set(layer["columnOrder"])
        for column in layer["columns"].values():
            assert column["sourceField"] in {*assets.FIELD_TYPES, "___records___"}
            fields.add((column["operationType"], column["sourceField"]))
    for wanted in [("terms", "genai_sample.model"), ("terms", "genai_sample.version"),
                   ("terms", "genai_sample.quality.finish_reason"),
                   ("range", "genai_sample.quality.mean_nll"),
                   ("range", "genai_sample.timings.total_s"),
                   ("terms", "genai_sample.version_label"), ("terms", "error.type")]:  # fmt: skip
        assert wanted in fields
    (dashboard,) = [o for o in objects if o["type"] == "dashboard"]
    controls = json.loads(dashboard["attributes"]["controlGroupInput"]["panelsJSON"])
    assert {c["explicitInput"]["fieldName"] for c in controls.values()} == {
        "genai_sample.model", "genai_sample.version"}  # fmt: skip
    panels = json.loads(dashboard["attributes"]["panelsJSON"])
    assert {p["type"] for p in panels} == {"lens", "search"} and len(panels) == len(lenses) + 4
    cells = [(x, y) for p in panels for x in range(p["gridData"]["x"], p["gridData"]["x"]
             + p["gridData"]["w"]) for y in range(p["gridData"]["y"], p["gridData"]["y"]
             + p["gridData"]["h"])]  # fmt: skip
    assert len(cells) == len(set(cells)) and max(x for x, _y in cells) < 48  # no overlap


def test_kibana_versions_that_can_import() -> None:
    assert assets.kibana_version("9.2.1") >= assets.KIBANA_MIN_VERSION
    assert assets.kibana_version("8.19.3") >= assets.KIBANA_MIN_VERSION
    assert assets.kibana_version("8.8.2") < assets.KIBANA_MIN_VERSION
    assert assets.kibana_version("junk") == (0, 0)
