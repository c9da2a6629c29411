"""The record uses the OpenTelemetry gen_ai and ECS fields where one exists, and SCHEMA.md says
which fields are standard and which are the project's own."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from devtools.standins.es import EsStandin
from log_pipeline import assets, record
from log_pipeline.outputs import Item, Outcome
from log_pipeline.outputs.elasticsearch import ElasticsearchOutput, make_client
from log_pipeline.outputs.sqlite import SqliteOutput
from log_pipeline.record import encode_feedback_record, encode_records
from log_pipeline.search import EsStore, Filters, SqliteStore
from log_pipeline.search_format import value_at
from tests.log_pipeline.conftest import make_sample
from tests.support.records import build_records
from tokenpulse import paths
from tokenpulse.samples import Feedback

SCHEMA = paths.ROOT / "log_pipeline" / "SCHEMA.md"


def _origins() -> dict[str, str]:
    """field -> its `standard` column in SCHEMA.md."""
    rows = re.findall(r"^\| `([^`]+)` \| \w+ \| ([\w/ ]+?) \|", SCHEMA.read_text(), re.M)
    return dict(rows)


def _pair(status: int = 200, version: str = "1", **params: object) -> list[dict[str, object]]:
    sample = make_sample(1, status=status, version=version)
    sample.params.update(params)
    outputs = ["o"] if status < 400 else []
    built = build_records(sample, ["p"], outputs, ("head",), 0.1, Counter(), sample_id="a" * 32)
    data, _n = encode_records(sample, ["p"], outputs, ("head",), 0.1, Counter(), sample_id="a" * 32)
    assert data == b"".join(
        json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" for r in built
    )
    return built


def test_status_ecs_version_and_the_served_model() -> None:
    (ok,) = _pair(top_k=40, stop=["\n\n", "User:"])
    (failed,) = _pair(status=503, version="")  # refused before any version served it
    assert ok["http"] == {"response": {"status_code": 200}}
    assert failed["http"] == {"response": {"status_code": 503}}
    assert "status" not in ok["genai_sample"]  # type: ignore[operator]
    assert ok["ecs"] == {"version": record.ECS_VERSION}
    gen_ai = ok["gen_ai"]
    assert isinstance(gen_ai, dict)
    assert gen_ai["request"]["model"] == "gen"  # what the client asked for
    assert gen_ai["response"]["model"] == "gen/1"  # the version that served it
    assert gen_ai["request"]["top_k"] == 40.0 and isinstance(gen_ai["request"]["top_k"], float)
    assert gen_ai["request"]["stop_sequences"] == ["\n\n", "User:"]
    failed_gen_ai = failed["gen_ai"]
    assert isinstance(failed_gen_ai, dict) and failed_gen_ai["response"]["model"] == ""


def test_stop_sequences_keep_only_strings() -> None:
    (rec,) = _pair(stop=["ok", 3, None])
    assert rec["gen_ai"]["request"]["stop_sequences"] == ["ok"]  # type: ignore[index]
    (none,) = _pair(stop=[])
    assert "stop_sequences" not in none["gen_ai"]["request"]  # type: ignore[index]


def test_schema_says_which_fields_are_standard() -> None:
    origins = _origins()
    assert set(origins) == set(assets.FIELD_TYPES)
    assert set(origins.values()) <= {"ECS", "OTel", "OTel/ECS", "project"}
    for field, origin in origins.items():
        if field.startswith("genai_sample."):
            assert origin == "project", field
        elif field.startswith("gen_ai."):
            assert origin.startswith("OTel"), field
        else:
            assert origin == "ECS", field


def test_standard_types() -> None:
    types = assets.FIELD_TYPES
    assert types["gen_ai.request.top_k"] == "double"  # OTel: double
    assert types["gen_ai.request.stop_sequences"] == "keyword"
    assert types["http.response.status_code"] == "long"  # ECS: long
    assert types["ecs.version"] == "keyword"
    assert "genai_sample.status" not in types


def test_records_from_before_the_rename_answer_the_status_filter_in_both_stores(
    tmp_path: Path,
) -> None:
    """A store holds records written before `genai_sample.status` became
    `http.response.status_code` (an ES backing index from before the rollover, SQLite rows):
    both stores still find, show and export them by status."""
    old, new = (json.loads(line) for line in _lines(503, 500))
    old["genai_sample"]["status"] = old.pop("http")["response"]["status_code"]
    items = [Item(r["event"]["id"], r, json.dumps(r).encode()) for r in (old, new)]
    db = tmp_path / "samples.db"
    sqlite_out = SqliteOutput(db)
    assert [r.outcome for r in sqlite_out.send(items)] == [Outcome.OK] * 2
    sqlite_out.close()
    with EsStandin(stream_patterns=(assets.PATTERN,)) as es:
        es_out = ElasticsearchOutput(make_client(es.url), assets.DEFAULT_STREAM)
        assert [r.outcome for r in es_out.send(items)] == [Outcome.OK] * 2
        for store in (SqliteStore(db), EsStore(es.url, assets.PATTERN)):
            found = list(store.search(Filters(status="5xx", limit=10)))
            assert {value_at(r, "http.response.status_code") for r in found} == {500, 503}
            assert not list(store.search(Filters(status="2xx", limit=10)))


def _lines(*statuses: int) -> list[bytes]:
    out = []
    for i, status in enumerate(statuses):
        data, _n = encode_records(
            make_sample(i, status=status), ["p"], [], ("error",), 0.1, Counter(),
            sample_id=f"{i:032x}",
        )  # fmt: skip
        out.append(data.rstrip(b"\n"))
    return out


def test_a_feedback_record_has_the_standard_fields_of_a_sample() -> None:
    """`ecs.version`, `http.response.status_code` (the gateway's 202 to the feedback) and the
    served version as `gen_ai.response.model`, the requested name as `gen_ai.request.model`."""
    known = Feedback("req-1", "cmpl-req-1", "key-a", -1.0, "thumbs", "", 1.0, "gen", "7", "canary")
    rec = json.loads(encode_feedback_record(known, "", "late", Counter(), sample_id="d" * 32))
    assert rec["ecs"] == {"version": record.ECS_VERSION}
    assert rec["http"] == {"response": {"status_code": record.FEEDBACK_STATUS}}
    assert record.FEEDBACK_STATUS == 202
    assert rec["gen_ai"]["request"] == {"model": "gen"}
    assert rec["gen_ai"]["response"] == {"id": "req-1", "model": "gen/7"}
    unknown = Feedback("req-2", "gen-req-2", "key-a", 1.0, "thumbs")  # no longer remembered
    rec = json.loads(encode_feedback_record(unknown, "", "late", Counter(), sample_id="e" * 32))
    assert rec["gen_ai"]["response"] == {"id": "req-2", "model": ""}
    assert rec["gen_ai"]["request"] == {"model": ""}
    assert list(rec)[:3] == ["@timestamp", "message", "event"]  # the head the shipper reads
