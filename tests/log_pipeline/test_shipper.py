"""Shipper reliability against the ES stand-in and SQLite, with exact counts."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from devtools.standins.es import EsStandin
from log_pipeline.checkpoint import Position, checkpoint_path, load_checkpoint, save_checkpoint
from log_pipeline.deadletter import deadletter_path
from log_pipeline.spool import list_segments
from stack.cli import main
from tests.log_pipeline import conftest
from tests.log_pipeline.conftest import make_sample
from tests.log_pipeline.support import (
    PATTERN,
    STREAM,
    metric,
    request_ids,
    shipped,
    shipper_settings,
    shipping,
    spool_ids,
    sqlite_docs,
    sqlite_ids,
    wait_until,
)
from tests.support.records import read_deadletters
from tokenpulse.samples import Sample

FAILED = "tokenpulse_shipper_send_failures_total"


_RECORD_IDS: dict[str, str] = {}  # request id -> record id of what this test wrote


@pytest.fixture(autouse=True)
def _forget_ids() -> None:
    _RECORD_IDS.clear()


def write_samples(spool: Path, samples: list[Sample], **settings: object) -> None:
    """Write through the real writer and note the record ids it drew (random per sample)."""
    before = set(spool_ids(spool)) if spool.exists() else set()
    conftest.write_samples(spool, samples, **settings)
    _RECORD_IDS.update({req: rid for rid, req in spool_ids(spool).items() if rid not in before})


def _id(request: str) -> str:
    return _RECORD_IDS[request]


def _ids(n: int, start: int = 0) -> set[str]:
    return {_id(f"req-{i}") for i in range(start, start + n)}


def test_both_outputs_get_every_record_once_and_acked_segments_go(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    write_samples(spool, [make_sample(i) for i in range(120)], segment_max_bytes=20_000)
    assert len(list_segments(spool)) > 3
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        settings = shipper_settings(spool, outputs=["sqlite", "elasticsearch"], es_url=es.url)
        with shipping(settings) as sh:
            wait_until(lambda: shipped(sh, "sqlite") == 120 == shipped(sh, "elasticsearch"), "both")
            wait_until(lambda: len(list_segments(spool)) == 1, "acknowledged segments deleted")
            assert metric(sh, "tokenpulse_shipper_backlog_bytes", output="sqlite") == 0
        assert set(es.docs(STREAM)) == _ids(120)
    ids = sqlite_ids(settings.sqlite_path)
    assert len(ids) == 120 and set(ids) == _ids(120)
    for out in ("sqlite", "elasticsearch"):
        assert load_checkpoint(checkpoint_path(settings.state(), out)) is not None


def test_elasticsearch_down_for_a_stretch_while_traffic_flows(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        settings = shipper_settings(spool, outputs=["sqlite", "elasticsearch"], es_url=es.url)
        es.refuse()
        with shipping(settings) as sh:
            write_samples(spool, [make_sample(i) for i in range(60)])
            wait_until(lambda: shipped(sh, "sqlite") == 60, "sqlite keeps shipping")
            wait_until(lambda: metric(sh, FAILED, output="elasticsearch", reason="connection") >= 2,
                       "connection failures counted")  # fmt: skip
            assert metric(sh, "tokenpulse_shipper_output_up", output="elasticsearch") == 0
            for name in ("backlog_bytes", "oldest_unshipped_age_seconds"):
                wait_until(lambda n=name: metric(sh, f"tokenpulse_shipper_{n}",
                                                 output="elasticsearch") > 0, name)  # fmt: skip
            assert shipped(sh, "elasticsearch") == 0
            write_samples(spool, [make_sample(i) for i in range(60, 100)])  # still down
            es.accept()
            wait_until(lambda: len(es.docs(STREAM)) == 100, "every record after the outage")
            wait_until(lambda: shipped(sh, "sqlite") == 100, "sqlite")
            assert metric(sh, "tokenpulse_shipper_output_up", output="elasticsearch") == 1
        assert set(es.docs(STREAM)) == _ids(100)
    assert sorted(sqlite_ids(settings.sqlite_path)) == sorted(_ids(100))


def test_whole_request_429_and_503_are_retried(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    write_samples(spool, [make_sample(i) for i in range(30)])
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        es.faults.request_status, es.faults.request_status_count = 429, 3
        settings = shipper_settings(spool, outputs=["elasticsearch"], es_url=es.url)
        with shipping(settings) as sh:
            wait_until(lambda: shipped(sh, "elasticsearch") == 30, "delivered after 429s")
            assert metric(sh, FAILED, output="elasticsearch", reason="rejected_429") == 3
            es.faults.request_status, es.faults.request_status_count = 503, 2
            write_samples(spool, [make_sample(i) for i in range(30, 40)])
            wait_until(lambda: shipped(sh, "elasticsearch") == 40, "delivered after 503s")
            assert metric(sh, FAILED, output="elasticsearch", reason="server_error") == 2
        assert set(es.docs(STREAM)) == _ids(40)


def test_item_429_retried_and_mapping_rejections_dead_lettered(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    write_samples(spool, [make_sample(i) for i in range(50)])
    throttled = sorted(_ids(5, start=10))
    rejected = sorted(_ids(3, start=30))
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        es.faults.item_429 = dict.fromkeys(throttled, 2)  # two 429s each, then accepted
        es.faults.item_400 = set(rejected)  # rejected every time
        settings = shipper_settings(spool, outputs=["elasticsearch"], es_url=es.url)
        with shipping(settings) as sh:
            wait_until(lambda: shipped(sh, "elasticsearch") == 47, "the acceptable records")
            backlog = "tokenpulse_shipper_backlog_bytes"
            wait_until(lambda: metric(sh, backlog, output="elasticsearch") == 0, "none left")
            assert metric(sh, FAILED, output="elasticsearch", reason="rejected_429") == 10
            assert (
                metric(sh, "tokenpulse_shipper_records_retried_total", output="elasticsearch") == 10
            )
            assert metric(sh, "tokenpulse_shipper_records_dead_lettered_total",
                          output="elasticsearch") == 3  # fmt: skip
        assert set(es.docs(STREAM)) == _ids(50) - set(rejected)
        assert all(es.item_attempts[i] == 1 for i in rejected)  # never retried
        assert all(es.item_attempts[i] == 3 for i in throttled)
    letters = read_deadletters(deadletter_path(settings.state(), "elasticsearch"))
    assert sorted(str(e["id"]) for e in letters) == rejected
    assert all("document_parsing_exception" in str(e["reason"]) for e in letters)
    assert all(e["record"]["event"]["id"] == e["id"] for e in letters)  # type: ignore[index]


def test_malformed_and_torn_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    write_samples(spool, [make_sample(i) for i in range(10)])
    first = list_segments(spool)[0]
    with first.open("ab") as fh:  # garbage between records, then a torn line at the end
        fh.write(b'not json at all\n{"event": {}}\n')
        fh.write(json.dumps({"@timestamp": "x"}).encode()[:9])
    write_samples(spool, [make_sample(i) for i in range(10, 20)])  # a new writer: new segment
    settings = shipper_settings(spool, outputs=["sqlite"])
    with shipping(settings) as sh:
        wait_until(lambda: shipped(sh, "sqlite") == 20, "every good record")
        wait_until(lambda: metric(sh, "tokenpulse_shipper_malformed_lines_total") == 3, "counted")
    assert sorted(sqlite_ids(settings.sqlite_path)) == sorted(_ids(20))


def test_unreadable_checkpoint_restarts_from_the_oldest_segment(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    write_samples(spool, [make_sample(i) for i in range(25)])
    settings = shipper_settings(spool, outputs=["sqlite"])
    with shipping(settings) as sh:
        wait_until(lambda: shipped(sh, "sqlite") == 25, "first run")
    checkpoint_path(settings.state(), "sqlite").write_bytes(b"\x00garbage{")
    write_samples(spool, [make_sample(i) for i in range(25, 40)])
    with shipping(settings) as sh:
        assert metric(sh, "tokenpulse_shipper_checkpoint_errors_total", output="sqlite") == 1
        wait_until(lambda: metric(sh, "tokenpulse_shipper_backlog_bytes", output="sqlite") == 0
                   and shipped(sh, "sqlite") >= 15, "second run")  # fmt: skip
    ids = sqlite_ids(settings.sqlite_path)
    assert len(ids) == 40 and set(ids) == _ids(40)


def test_a_store_answering_garbage_never_loses_a_record(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    write_samples(spool, [make_sample(i) for i in range(20)])
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        es.faults.garbage = True
        settings = shipper_settings(spool, outputs=["elasticsearch"], es_url=es.url)
        with shipping(settings) as sh:

            def bad() -> float:
                return metric(sh, FAILED, output="elasticsearch", reason="bad_response")

            wait_until(lambda: bad() >= 2, "garbage counted")
            es.faults.garbage = False
            es.faults.no_product_header = True  # a 2xx from something that is not Elasticsearch
            before = bad()
            wait_until(lambda: bad() > before, "not-Elasticsearch answers counted")
            assert shipped(sh, "elasticsearch") == 0
            es.faults.no_product_header = False
            wait_until(lambda: shipped(sh, "elasticsearch") == 20, "delivered once sane")
        assert set(es.docs(STREAM)) == _ids(20)


def test_stop_mid_retry_keeps_the_checkpoint_before_the_batch(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    write_samples(spool, [make_sample(i) for i in range(5)])
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        es.refuse()
        settings = shipper_settings(spool, outputs=["elasticsearch"], es_url=es.url)
        with shipping(settings) as sh:
            wait_until(lambda: metric(sh, FAILED, output="elasticsearch", reason="connection") > 0,
                       "a failed attempt")  # fmt: skip
        assert load_checkpoint(checkpoint_path(settings.state(), "elasticsearch")) is None
    assert threading.active_count() < 50


def test_a_corrupt_record_with_a_valid_head_is_dead_lettered_not_retried(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    write_samples(spool, [make_sample(i) for i in range(5)])
    segment = list_segments(spool)[0]
    lines = segment.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2][:120] + b"\x00garbage}\n"  # the head parses, the rest is not JSON
    segment.write_bytes(b"".join(lines))
    bad_id = _id("req-2")
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        settings = shipper_settings(spool, outputs=["sqlite", "elasticsearch"], es_url=es.url)
        with shipping(settings) as sh:
            dead = "tokenpulse_shipper_records_dead_lettered_total"
            for out in ("sqlite", "elasticsearch"):
                wait_until(lambda o=out: shipped(sh, o) == 4, f"{out}: the four good records")
                wait_until(lambda o=out: metric(sh, dead, output=o) == 1, f"{out}: one letter")
        assert set(es.docs(STREAM)) == _ids(5) - {bad_id}
    assert sorted(sqlite_ids(settings.sqlite_path)) == sorted(_ids(5) - {bad_id})
    for out in ("sqlite", "elasticsearch"):
        (letter,) = read_deadletters(deadletter_path(settings.state(), out))
        assert letter["id"] == bad_id and "garbage" in str(letter["record"])


def test_a_reused_request_id_keeps_every_sample(tmp_path: Path) -> None:
    """A client that sends the same X-Request-ID twice has two samples, not one and a '409'."""
    spool = tmp_path / "spool"
    write_samples(spool, [make_sample(7, prompt="first question"),
                          make_sample(7, prompt="second question")])  # fmt: skip
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        settings = shipper_settings(spool, outputs=["sqlite", "elasticsearch"], es_url=es.url)
        with shipping(settings) as sh:
            wait_until(lambda: shipped(sh, "sqlite") == 2 == shipped(sh, "elasticsearch"), "both")
            for out in ("sqlite", "elasticsearch"):
                assert metric(sh, "tokenpulse_shipper_records_duplicate_total", output=out) == 0
        es_docs = list(es.docs(STREAM).values())
    for docs in (es_docs, sqlite_docs(settings.sqlite_path)):
        assert request_ids(docs) == ["req-7", "req-7"]  # the client's id, searchable as its own
        assert sorted(d["genai_sample"]["prompt"]["text"] for d in docs) == [
            "first question", "second question"]  # fmt: skip
        assert len({d["event"]["id"] for d in docs}) == 2


def test_a_lost_checkpoint_after_a_rollover_stores_nothing_twice(tmp_path: Path) -> None:
    """`create` deduplicates only within the write index: replaying the retained spool after the
    daily rollover must still store each record once (the output looks ids up first)."""
    spool = tmp_path / "spool"
    write_samples(spool, [make_sample(i) for i in range(60)])  # one segment: retained
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        settings = shipper_settings(spool, outputs=["elasticsearch"], es_url=es.url,
                                    batch_records=10)  # fmt: skip
        with shipping(settings) as sh:
            wait_until(lambda: shipped(sh, "elasticsearch") == 60, "first run")
        es.rollover(STREAM)  # ILM's daily rollover
        checkpoint_path(settings.state(), "elasticsearch").unlink()  # lost: the spool replays
        write_samples(spool, [make_sample(i) for i in range(60, 80)])
        with shipping(settings) as sh:
            wait_until(lambda: shipped(sh, "elasticsearch") == 80, "replayed and new")
            duplicates = metric(sh, "tokenpulse_shipper_records_duplicate_total",
                                output="elasticsearch")  # fmt: skip
        copies = es.copies(STREAM)
        print(f"rollover replay: {len(es.streams[STREAM])} backing indices, {es.created} created, "
              f"{duplicates:.0f} found stored and not resent, "
              f"{sum(n > 1 for n in copies.values())} stored twice")  # fmt: skip
        assert len(es.streams[STREAM]) == 2
        assert set(copies) == _ids(80) and max(copies.values()) == 1 and es.created == 80
        assert duplicates == 60


def test_started_before_es_setup_it_stalls_and_alerts_then_delivers(tmp_path: Path) -> None:
    """No data stream yet: `require_data_stream` makes ES answer 404 instead of auto-creating a
    plain index; a 404 (or 403) is a configuration error: the output stalls, nothing is
    dead-lettered, and once `es setup` ran every record lands in the data stream."""
    spool = tmp_path / "spool"
    write_samples(spool, [make_sample(i) for i in range(30)])
    with EsStandin() as es:  # no template: `es setup` has not run
        settings = shipper_settings(spool, outputs=["elasticsearch"], es_url=es.url)
        with shipping(settings) as sh:
            stalled = "tokenpulse_shipper_output_stalled"
            wait_until(lambda: metric(sh, stalled, output="elasticsearch") == 1, "stalled")
            wait_until(lambda: metric(sh, FAILED, output="elasticsearch",
                                      reason="config_error") >= 2, "retried, counted")  # fmt: skip
            assert es.indices == {} and es.streams == {}  # no plain index under the stream's name
            dead = "tokenpulse_shipper_records_dead_lettered_total"
            assert metric(sh, dead, output="elasticsearch") == 0
            assert shipped(sh, "elasticsearch") == 0
            assert main(["es", "setup", "--es-url", es.url]) == 0
            wait_until(lambda: shipped(sh, "elasticsearch") == 30, "delivered after setup")
            assert metric(sh, stalled, output="elasticsearch") == 0
        assert set(es.docs(STREAM)) == _ids(30) and list(es.streams) == [STREAM]
    assert not deadletter_path(settings.state(), "elasticsearch").exists()


def test_a_413_splits_the_batch_and_a_record_too_large_alone_is_dead_lettered(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    samples = [make_sample(i) for i in range(40)]
    samples[17] = make_sample(17, prompt="x" * 6000)  # over the limit on its own
    write_samples(spool, samples)
    with EsStandin(stream_patterns=(PATTERN,), max_content_length=5000) as es:
        settings = shipper_settings(spool, outputs=["elasticsearch"], es_url=es.url,
                                    batch_records=40)  # fmt: skip
        with shipping(settings) as sh:
            wait_until(lambda: shipped(sh, "elasticsearch") == 39, "everything else")
            dead = "tokenpulse_shipper_records_dead_lettered_total"
            wait_until(lambda: metric(sh, dead, output="elasticsearch") == 1, "the big one")
            assert metric(sh, FAILED, output="elasticsearch", reason="too_large") == 1
        assert set(es.docs(STREAM)) == _ids(40) - {_id("req-17")} and es.too_large > 0
    (letter,) = read_deadletters(deadletter_path(settings.state(), "elasticsearch"))
    assert letter["id"] == _id("req-17") and "413" in str(letter["reason"])


def test_a_known_output_holds_its_segments_until_forgotten(tmp_path: Path) -> None:
    """Run with SQLite only for a while, then add Elasticsearch back: what ES had not shipped is
    still there, unless the output was forgotten on purpose; then the loss is counted."""
    spool = tmp_path / "spool"
    write_samples(spool, [make_sample(i) for i in range(60)], segment_max_bytes=20_000)
    segments = len(list_segments(spool))
    assert segments > 3
    sqlite_only = shipper_settings(spool, outputs=["sqlite"])
    save_checkpoint(checkpoint_path(sqlite_only.state(), "elasticsearch"), Position(1, 0))
    with shipping(sqlite_only) as sh:
        wait_until(lambda: shipped(sh, "sqlite") == 60, "sqlite")
        held = "tokenpulse_shipper_backlog_bytes"
        wait_until(lambda: metric(sh, held, output="elasticsearch") > 0, "the held backlog")
        sh.housekeeping()
        assert len(list_segments(spool)) == segments  # held for elasticsearch
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        both = shipper_settings(spool, outputs=["sqlite", "elasticsearch"], es_url=es.url)
        with shipping(both) as sh:
            wait_until(lambda: shipped(sh, "elasticsearch") == 60, "ES gets all it missed")
            assert metric(sh, "tokenpulse_shipper_segments_skipped_total",
                          output="elasticsearch") == 0  # fmt: skip
    refused = ["shipper", "--spool-dir", str(spool), "--outputs", "sqlite"]
    assert main([*refused, "--forget-output", "sqlite"]) == 2  # still configured
    assert main(["shipper", "--spool-dir", str(spool), "--forget-output", "elasticsearch"]) == 0
    assert not checkpoint_path(both.state(), "elasticsearch").exists()
    write_samples(spool, [make_sample(i) for i in range(60, 70)])
    with shipping(sqlite_only) as sh:
        wait_until(lambda: shipped(sh, "sqlite") == 10, "sqlite")
        wait_until(lambda: len(list_segments(spool)) == 1, "released once forgotten")
    # an output whose segments went anyway (deleted by hand) counts and logs the loss
    save_checkpoint(checkpoint_path(both.state(), "elasticsearch"), Position(1, 0))
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        with shipping(shipper_settings(spool, outputs=["elasticsearch"], es_url=es.url)) as sh:
            wait_until(lambda: shipped(sh, "elasticsearch") == 10, "what is left")
            skipped = metric(sh, "tokenpulse_shipper_segments_skipped_total",
                             output="elasticsearch")  # fmt: skip
    assert skipped == segments
