"""Bulk item classification (Filebeat's rules) and the request body."""

from __future__ import annotations

import json

import pytest

from devtools.standins.es import EsStandin
from log_pipeline.outputs import Item, Outcome, RetryableError
from log_pipeline.outputs.elasticsearch import ElasticsearchOutput, classify_item, make_client

STREAM = "genai-samples-default"
PATTERNS = ("genai-samples-*",)  # a data-stream template, as `es setup` installs


@pytest.mark.parametrize(
    ("item", "outcome", "failure"),
    [
        ({"create": {"status": 201}}, Outcome.OK, ""),
        ({"create": {"status": 409, "error": {"type": "version_conflict_engine_exception"}}},
         Outcome.DUPLICATE, ""),
        ({"create": {"status": 429, "error": {"type": "es_rejected_execution_exception"}}},
         Outcome.RETRY, "rejected_429"),
        ({"create": {"status": 503, "error": {"type": "unavailable"}}}, Outcome.RETRY,
         "server_error"),
        ({"create": {"status": 400, "error": {"type": "document_parsing_exception",
                                               "reason": "bad"}}}, Outcome.PERMANENT, "permanent"),
        ({"create": {"status": 400, "error": {"type": "strict_dynamic_mapping_exception"}}},
         Outcome.PERMANENT, "permanent"),
        ({"create": {"status": 403, "error": {"type": "security_exception"}}}, Outcome.RETRY,
         "config_error"),
        ({"create": {"status": 404, "error": {"type": "index_not_found_exception"}}},
         Outcome.RETRY, "config_error"),
        ({"create": {}}, Outcome.RETRY, "bad_response"),
        ("nonsense", Outcome.RETRY, "bad_response"),
    ],
)  # fmt: skip
def test_classify(item: object, outcome: Outcome, failure: str) -> None:
    result = classify_item(item)
    assert (result.outcome, result.failure) == (outcome, failure)


def test_permanent_reason_names_type_and_reason() -> None:
    item = {"create": {"status": 400, "error": {"type": "document_parsing_exception",
                                                 "reason": "failed to parse [x]"}}}  # fmt: skip
    assert classify_item(item).reason == "400 document_parsing_exception: failed to parse [x]"


def test_body_is_create_with_the_record_id() -> None:
    out = ElasticsearchOutput(make_client("http://127.0.0.1:9"), "genai-samples-default")
    raw = b'{"@timestamp":"2026-01-01T00:00:00.000Z","event":{"id":"abc"}}'
    body = out.body([Item("abc", json.loads(raw), raw)])
    assert body == b'{"create":{"_id":"abc"}}\n' + raw + b"\n"


@pytest.mark.parametrize("status", [429, 503])
def test_the_client_never_retries_by_itself(status: int) -> None:
    raw = b'{"@timestamp":"2026-01-01T00:00:00.000Z","event":{"id":"abc"}}'
    with EsStandin(stream_patterns=PATTERNS) as es:
        es.faults.request_status, es.faults.request_status_count = status, 1
        out = ElasticsearchOutput(make_client(es.url), "genai-samples-default")
        with pytest.raises(RetryableError):
            out.send([Item("abc", json.loads(raw), raw)])
        assert es.bulk_requests == 0 and es.requests == 1  # one request, answered by the fault
        assert out.send([Item("abc", json.loads(raw), raw)])[0].outcome is Outcome.OK


def test_user_and_password_reach_a_secured_elasticsearch() -> None:
    from log_pipeline.settings import EsAuth

    raw = b'{"@timestamp":"2026-01-01T00:00:00.000Z","event":{"id":"abc"}}'
    with EsStandin(basic_auth="elastic:s3cret", stream_patterns=PATTERNS) as es:
        wrong = ElasticsearchOutput(make_client(es.url, EsAuth(username="elastic", password="x")),
                                    "genai-samples-default")  # fmt: skip
        with pytest.raises(RetryableError, match="401"):  # kept and retried, never dropped
            wrong.send([Item("abc", json.loads(raw), raw)])
        right = ElasticsearchOutput(
            make_client(es.url, EsAuth(username="elastic", password="s3cret")),
            "genai-samples-default",
        )
        assert right.send([Item("abc", json.loads(raw), raw)])[0].outcome is Outcome.OK
        assert es.created == 1


def _items(n: int) -> list[Item]:
    out = []
    for i in range(n):
        raw = json.dumps({"@timestamp": "2026-01-01T00:00:00.000Z", "event": {"id": f"id-{i}"}})
        out.append(Item(f"id-{i}", None, raw.encode(), "2026-01-01T00:00:00.000Z"))
    return out


def test_an_ambiguous_failure_then_a_rollover_stores_nothing_twice() -> None:
    """A bulk that Elasticsearch applied but whose answer was lost (a proxy's 504), resent after
    the daily rollover: `create` alone would store a second copy in the new backing index."""
    items = _items(20)
    with EsStandin(stream_patterns=PATTERNS) as es:
        out = ElasticsearchOutput(make_client(es.url), STREAM)
        assert all(r.outcome is Outcome.OK for r in out.send(items[:5]))  # a clean start
        es.faults.applied_then_status, es.faults.applied_then_status_count = 504, 1
        with pytest.raises(RetryableError):
            out.send(items)  # stored, but the shipper cannot know
        es.rollover(STREAM)
        results = out.send(items)  # the shipper's retry
        assert [r.outcome for r in results] == [Outcome.DUPLICATE] * 20
        copies = es.copies(STREAM)
        assert len(copies) == 20 and max(copies.values()) == 1 and es.created == 20
        assert all(r.outcome is Outcome.OK for r in out.send(_items(25)[20:]))
        assert es.created == 25 and len(es.streams[STREAM]) == 2
        out.close()
