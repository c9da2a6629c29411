"""The ES stand-in keeps data streams as Elasticsearch does: backing indices, rollover, `_id`
unique per backing index only, `require_data_stream`, and a 413 over `http.max_content_length`."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import httpx
import pytest
from elasticsearch import ApiError

from devtools.standins.es import EsStandin
from log_pipeline.outputs.elasticsearch import make_client

STREAM = "genai-samples-default"
DOC = {"@timestamp": "2026-01-01T00:00:00.000Z", "message": "m"}


def _create(url: str, doc_id: str, target: str = STREAM, **params: str) -> dict[str, object]:
    body = json.dumps({"create": {"_id": doc_id}}) + "\n" + json.dumps(DOC) + "\n"
    resp = httpx.post(f"{url}/{target}/_bulk", content=body, params=params,
                      headers={"Content-Type": "application/x-ndjson"})  # fmt: skip
    resp.raise_for_status()
    (item,) = resp.json()["items"]
    return dict(item["create"])


def test_rollover_makes_a_new_write_index_and_ids_are_unique_per_backing_index() -> None:
    with EsStandin(stream_patterns=("genai-samples-*",)) as es:
        client = make_client(es.url)
        client.indices.create_data_stream(name=STREAM)
        first = _create(es.url, "a")
        assert first["status"] == 201
        assert _create(es.url, "a")["status"] == 409  # same backing index: a duplicate
        day = f"{datetime.now(UTC):%Y.%m.%d}"
        assert first["_index"] == f".ds-{STREAM}-{day}-000001"
        rolled = client.indices.rollover(alias=STREAM).body
        assert rolled["old_index"] == first["_index"]
        assert rolled["new_index"] == f".ds-{STREAM}-{day}-000002"
        again = _create(es.url, "a")  # after a rollover ES stores a second copy
        assert (again["status"], again["_index"]) == (201, rolled["new_index"])
        assert es.copies(STREAM)["a"] == 2 and es.created == 2
        (info,) = client.indices.get_data_stream(name=STREAM).body["data_streams"]
        assert [i["index_name"] for i in info["indices"]] == [first["_index"], rolled["new_index"]]
        assert info["generation"] == 2
        hits = client.search(index=STREAM, query={"ids": {"values": ["a"]}}).body["hits"]
        assert hits["total"]["value"] == 2  # a search spans every backing index
        assert {h["_index"] for h in hits["hits"]} == {first["_index"], rolled["new_index"]}
        client.indices.refresh(index=STREAM)
        client.close()


def test_backing_indices_take_the_templates_mappings_at_creation() -> None:
    with EsStandin() as es:
        client = make_client(es.url)
        client.cluster.put_component_template(
            name="m", template={"mappings": {"properties": {"x": {"type": "keyword"}}}}
        )
        client.indices.put_index_template(name="t", index_patterns=["genai-samples-*"],
                                          data_stream={}, composed_of=["m"])  # fmt: skip
        client.indices.create_data_stream(name=STREAM)
        client.cluster.put_component_template(
            name="m", template={"mappings": {"properties": {"x": {"type": "long"}}}}
        )
        client.indices.rollover(alias=STREAM)
        got = client.indices.get_mapping(index=STREAM).body
        kinds = [got[i]["mappings"]["properties"]["x"]["type"] for i in sorted(got)]
        assert kinds == ["keyword", "long"]  # a mapping change reaches only a new backing index
        client.close()


def test_require_data_stream_refuses_a_target_that_would_be_a_plain_index() -> None:
    with EsStandin() as es:  # no template: a write would auto-create a plain index
        refused = _create(es.url, "a", require_data_stream="true")
        assert refused["status"] == 404
        assert refused["error"]["type"] == "index_not_found_exception"  # type: ignore[index]
        assert es.indices == {} and es.streams == {}
        plain = _create(es.url, "a")  # without the flag ES makes a plain index, silently
        assert (plain["status"], plain["_index"]) == (201, STREAM)
        assert STREAM not in es.streams
    with EsStandin(stream_patterns=("genai-samples-*",)) as es:  # the template: auto-created
        made = _create(es.url, "a", require_data_stream="true")
        assert made["status"] == 201 and re.fullmatch(r"\.ds-.*-000001", str(made["_index"]))


def test_a_body_over_max_content_length_gets_a_413() -> None:
    with EsStandin(stream_patterns=("genai-samples-*",), max_content_length=1000) as es:
        assert _create(es.url, "small")["status"] == 201
        body = json.dumps({"create": {"_id": "big"}}) + "\n" + json.dumps(
            {**DOC, "message": "x" * 2000}) + "\n"  # fmt: skip
        resp = httpx.post(f"{es.url}/{STREAM}/_bulk", content=body,
                          headers={"Content-Type": "application/x-ndjson"})  # fmt: skip
        assert resp.status_code == 413 and es.too_large == 1 and "big" not in es.docs(STREAM)
        client = make_client(es.url)
        with pytest.raises(ApiError) as info:
            client.bulk(operations=body.encode(), index=STREAM)  # type: ignore[arg-type]
        assert info.value.meta.status == 413
        client.close()
