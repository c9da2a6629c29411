"""Dead letters rotate, count toward the spool's disk cap, and go back with `samples replay`."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.standins.es import EsStandin
from log_pipeline.deadletter import DeadLetters, deadletter_files, read_entries
from log_pipeline.outputs import Item
from log_pipeline.spool import spool_bytes
from stack.cli import main
from tests.log_pipeline.conftest import make_sample, write_samples
from tests.log_pipeline.support import (
    PATTERN,
    STREAM,
    metric,
    shipped,
    shipper_settings,
    shipping,
    spool_ids,
    wait_until,
)


def _item(i: int) -> Item:
    raw = b'{"@timestamp":"2026-01-01T00:00:00.000Z","event":{"id":"%032d"},"pad":"%s"}' % (
        i, b"x" * 500)  # fmt: skip
    return Item(f"{i:032d}", None, raw, "2026-01-01T00:00:00.000Z")


def test_dead_letters_rotate_and_keep_every_entry(tmp_path: Path) -> None:
    letters = DeadLetters(tmp_path / "state", "elasticsearch", segment_bytes=4096)
    for i in range(30):
        letters.write([(_item(i), "400 mapper_parsing_exception: bad")])
    files = deadletter_files(tmp_path / "state", "elasticsearch")
    assert len(files) > 3 and all(p.stat().st_size <= 4096 + 1024 for p in files)
    assert [e["id"] for p in files for e in read_entries(p)] == [f"{i:032d}" for i in range(30)]


def test_dead_letters_count_toward_the_disk_cap(spool: Path) -> None:
    state = spool / "state"
    letters = DeadLetters(state, "elasticsearch", segment_bytes=4096)
    for i in range(20):
        letters.write([(_item(i), "rejected")])
    held = sum(p.stat().st_size for p in deadletter_files(state, "elasticsearch"))
    assert spool_bytes(spool) == held
    writer = write_samples(spool, [make_sample(i) for i in range(40)], cap_bytes=held + 4096)
    dropped = writer.registry.get_sample_value(
        "tokenpulse_spool_records_dropped_total", {"reason": "disk_cap"}
    )
    assert dropped and spool_bytes(spool) <= held + 4096


@pytest.mark.parametrize("still_bad", [0, 1])
def test_replay_sends_dead_letters_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], still_bad: int
) -> None:
    spool = tmp_path / "spool"
    write_samples(spool, [make_sample(i) for i in range(20)])
    ids = sorted(spool_ids(spool))
    rejected = ids[:4]
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        es.faults.item_400 = set(rejected)  # e.g. a mapping that did not fit yet
        settings = shipper_settings(spool, outputs=["elasticsearch"], es_url=es.url)
        with shipping(settings) as sh:
            wait_until(lambda: shipped(sh, "elasticsearch") == 16, "the good ones")
            dead = "tokenpulse_shipper_records_dead_lettered_total"
            wait_until(lambda: metric(sh, dead, output="elasticsearch") == 4, "dead-lettered")
        es.faults.item_400 = set(rejected[:still_bad])  # the mapping is fixed (or not, for one)
        args = ["samples", "replay", "--output", "elasticsearch", "--spool-dir", str(spool),
                "--es-url", es.url]  # fmt: skip
        code = main(args)
        out = capsys.readouterr().out
        assert code == (1 if still_bad else 0)
        assert f"replayed {4 - still_bad}" in out and f"dead-lettered again {still_bad}" in out
        assert set(es.docs(STREAM)) == set(ids) - set(rejected[:still_bad])
        left = [e["id"] for p in deadletter_files(settings.state(), "elasticsearch")
                for e in read_entries(p)]  # fmt: skip
        assert left == rejected[:still_bad]
        assert main(args) == (1 if still_bad else 0)  # again: idempotent
        assert max(es.copies(STREAM).values()) == 1
