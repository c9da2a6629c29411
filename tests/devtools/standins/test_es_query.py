"""The stand-in's search follows Elasticsearch's semantics for what it supports."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from devtools.standins import es_query
from devtools.standins.es import EsStandin
from devtools.standins.es_query import QueryError, matches
from log_pipeline import assets

PROMPT, OUTPUT = "genai_sample.prompt.text", "genai_sample.output.text"


def _doc(prompt: str, output: str = "", **sample: Any) -> dict[str, Any]:
    sample = {"prompt": {"text": prompt}, "output": {"text": output}, **sample}
    return {"@timestamp": "2026-05-28T20:00:00.000Z", "genai_sample": sample}


def test_match_operator_and_phrase_follow_the_analyzer() -> None:
    doc = _doc("我要申请退款 for my iPhone", "Refund issued")
    assert matches(doc, {"match": {PROMPT: "退款"}})
    assert matches(doc, {"match": {PROMPT: {"query": "退款 nothing", "operator": "or"}}})
    assert not matches(doc, {"match": {PROMPT: {"query": "退款 nothing", "operator": "and"}}})
    assert matches(doc, {"match_phrase": {PROMPT: "申请退款"}})
    assert matches(doc, {"match": {PROMPT: "款退"}})  # per character, in any order: a match
    assert not matches(doc, {"match_phrase": {PROMPT: "款退"}})  # but not a phrase
    assert matches(doc, {"match_phrase": {PROMPT: "IPHONE"}})
    assert not matches(doc, {"match": {PROMPT: "refunds"}})  # no stemming
    assert not matches(doc, {"match": {PROMPT: "!!!"}})  # nothing to look for: no match


def test_multi_match_types() -> None:
    doc = _doc("refund my order", "it is on its way")
    both = {"query": "refund way", "fields": [PROMPT, OUTPUT], "operator": "and"}
    assert not matches(doc, {"multi_match": {**both, "type": "best_fields"}})  # one field each
    assert not matches(doc, {"multi_match": {**both, "type": "most_fields"}})
    assert matches(doc, {"multi_match": {**both, "type": "cross_fields"}})  # term by term
    assert matches(
        doc, {"multi_match": {"query": "my order", "type": "phrase", "fields": [PROMPT, OUTPUT]}}
    )
    assert not matches(doc, {"multi_match": {"query": "order my", "type": "phrase",
                                             "fields": [PROMPT, OUTPUT]}})  # fmt: skip


def test_bool_terms_and_ranges() -> None:
    doc = _doc("x", status=503, version="10", timings={"total_s": 1.5})
    doc["error"] = {"type": "upstream_error"}
    assert matches(doc, {"term": {"genai_sample.status": "503"}})  # numbers compare as numbers
    assert matches(doc, {"terms": {"genai_sample.version": ["9", "10"]}})
    assert matches(doc, {"range": {"genai_sample.status": {"gte": 500, "lte": 599}}})
    assert not matches(doc, {"range": {"genai_sample.timings.total_s": {"gt": 1.5}}})
    assert matches(doc, {"range": {"@timestamp": {"gte": "2026-05-28T19:59:59Z"}}})
    should = [{"term": {"error.type": "nope"}}, {"term": {"error.type": "upstream_error"}}]
    assert matches(doc, {"bool": {"should": should}})
    assert not matches(doc, {"bool": {"should": should, "minimum_should_match": 2}})
    not_nine = [{"term": {"genai_sample.version": "9"}}]
    assert matches(doc, {"bool": {"filter": [{"exists": {"field": "error.type"}}],
                                  "must_not": not_nine}})  # fmt: skip
    with pytest.raises(QueryError):
        matches(doc, {"fuzzy": {PROMPT: "x"}})


def _hits(n: int) -> list[es_query.Hit]:
    out = []
    for i in range(n):
        sample: dict[str, Any] = {"model": "ab"[i % 2]}
        if i % 3:
            sample["quality"] = {"mean_nll": float(i % 4)}
        doc = {"@timestamp": f"2026-05-28T20:00:{i:02d}.000Z", "event": {"id": f"id-{i:02d}"},
               "genai_sample": sample}  # fmt: skip
        out.append(("idx", f"id-{i:02d}", doc))
    return out


def test_sort_missing_last_and_search_after() -> None:
    sort = [{"genai_sample.quality.mean_nll": {"order": "desc", "missing": "_last"}},
            {"event.id": "desc"}]  # fmt: skip
    whole = es_query.search(_hits(12), {"sort": sort, "size": 12})["hits"]["hits"]
    nll = [h["_source"]["genai_sample"].get("quality", {}).get("mean_nll") for h in whole]
    assert nll == [3.0, 3.0, 2.0, 2.0, 1.0, 1.0, 0.0, 0.0, None, None, None, None]
    paged, after = [], None
    while True:
        body: dict[str, Any] = {"sort": sort, "size": 5}
        if after is not None:
            body["search_after"] = after
        page = es_query.search(_hits(12), body)["hits"]["hits"]
        paged += page
        if len(page) < 5:
            break
        after = page[-1]["sort"]
    assert [h["_id"] for h in paged] == [h["_id"] for h in whole]
    assert whole[0]["sort"][0] == 3.0
    dated = es_query.search(_hits(2), {"sort": [{"@timestamp": "asc"}]})["hits"]["hits"]
    moment = datetime(2026, 5, 28, 20, 0, tzinfo=UTC)
    assert [h["sort"] for h in dated] == [[int(moment.timestamp() * 1000)],
                                          [int(moment.timestamp() * 1000) + 1000]]  # fmt: skip


def test_the_result_window_and_total() -> None:
    with pytest.raises(QueryError, match=r"Result window is too large.*\[10001\]"):
        es_query.search(_hits(3), {"from": 10_000, "size": 1})
    es_query.search(_hits(3), {"from": 9_990, "size": 10})  # exactly the window: allowed
    many = _hits(3) * 4000
    assert es_query.search(many, {"size": 0})["hits"]["total"] == {"value": 10_000,
                                                                   "relation": "gte"}  # fmt: skip
    exact = es_query.search(many, {"size": 0, "track_total_hits": True})["hits"]["total"]
    assert exact == {"value": 12_000, "relation": "eq"}


def test_collapse_and_aggregations() -> None:
    hits = _hits(9)
    got = es_query.search(hits, {"sort": [{"event.id": "asc"}],
                                 "collapse": {"field": "genai_sample.model"}})  # fmt: skip
    assert [h["_id"] for h in got["hits"]["hits"]] == ["id-00", "id-01"]
    aggs = {"m": {"terms": {"field": "genai_sample.model", "size": 1}}}
    terms = es_query.search(hits, {"size": 0, "aggs": aggs})["aggregations"]["m"]
    assert terms["buckets"] == [{"key": "a", "doc_count": 5}] and terms["sum_other_doc_count"] == 4
    sources = [{"model": {"terms": {"field": "genai_sample.model"}}},
               {"nll": {"terms": {"field": "genai_sample.quality.mean_nll",
                                  "missing_bucket": True}}}]  # fmt: skip
    buckets, after = [], None
    while True:
        composite: dict[str, Any] = {"size": 2, "sources": sources}
        if after:
            composite["after"] = after
        agg = es_query.search(hits, {"size": 0, "aggs": {"g": {"composite": composite}}})
        page = agg["aggregations"]["g"]
        buckets += page["buckets"]
        after = page.get("after_key")
        if not page["buckets"]:
            break
    assert sum(b["doc_count"] for b in buckets) == 9
    assert buckets[0]["key"] == {"model": "a", "nll": None}  # missing first, ascending


@pytest.fixture
def standin() -> Iterator[EsStandin]:
    with EsStandin(stream_patterns=(assets.PATTERN,)) as es:
        lines = []
        for i in range(30):
            doc = _doc(f"第{i}个问题 退款", "ok")
            doc["event"] = {"id": f"id-{i:02d}"}
            lines += [json.dumps({"create": {"_id": f"id-{i:02d}"}}), json.dumps(doc)]
        httpx.post(f"{es.url}/{assets.DEFAULT_STREAM}/_bulk", content="\n".join(lines) + "\n",
                   headers={"Content-Type": "application/x-ndjson"})  # fmt: skip
        yield es


def test_point_in_time_over_http(standin: EsStandin) -> None:
    url = standin.url
    pit = httpx.post(f"{url}/{assets.PATTERN}/_pit", params={"keep_alive": "1m"}).json()["id"]
    late = _doc("退款 after the point in time")
    late["event"] = {"id": "id-99"}
    line = json.dumps({"create": {"_id": "id-99"}}) + "\n" + json.dumps(late) + "\n"
    ndjson = {"Content-Type": "application/x-ndjson"}
    httpx.post(f"{url}/{assets.DEFAULT_STREAM}/_bulk", headers=ndjson, content=line)
    body = {"pit": {"id": pit, "keep_alive": "1m"}, "size": 100, "sort": [{"event.id": "asc"}],
            "query": {"match_phrase": {PROMPT: "退款"}}}  # fmt: skip
    got = httpx.post(f"{url}/_search", json=body).json()
    assert got["pit_id"] == pit and len(got["hits"]["hits"]) == 30  # the late one is not seen
    refused = httpx.post(f"{url}/{assets.PATTERN}/_search", json=body)
    assert refused.status_code == 400
    window = httpx.post(f"{url}/{assets.PATTERN}/_search", json={"from": 9_999, "size": 2})
    assert window.status_code == 400 and "Result window" in window.text
    closed = httpx.request("DELETE", f"{url}/_pit", json={"id": pit})
    assert closed.json() == {"succeeded": True, "num_freed": 1}
    assert httpx.post(f"{url}/_search", json=body).status_code == 404
