"""The reader: batches are capped in records and in bytes; skipped segments are counted."""

from __future__ import annotations

from pathlib import Path

from log_pipeline.checkpoint import Position
from log_pipeline.reader import read_batch
from log_pipeline.spool import list_segments
from tests.log_pipeline.conftest import make_sample, write_samples


def test_batches_are_capped_in_bytes(spool: Path) -> None:
    samples = [make_sample(i) for i in range(30)]
    samples[10] = make_sample(10, prompt="x" * 20_000)  # bigger than the cap: goes alone
    write_samples(spool, samples)
    pos, sizes, seen = Position(1, 0), [], 0
    while seen < 30:
        batch = read_batch(spool, pos, max_items=1000, max_bytes=8000)
        assert batch.items
        sizes.append(sum(len(i.raw) for i in batch.items))
        assert sizes[-1] <= 8000 or len(batch.items) == 1
        seen += len(batch.items)
        pos = batch.end
    assert seen == 30 and len(sizes) > 3 and max(sizes) > 20_000


def test_missing_segments_are_counted(spool: Path) -> None:
    for n in range(4):
        write_samples(spool, [make_sample(n * 10 + i) for i in range(10)])  # a segment each
    first, second, *_ = list_segments(spool)
    second.unlink()  # deleted under this output's checkpoint
    batch = read_batch(spool, Position(1, 0), max_items=15, max_bytes=1 << 20)
    assert batch.skipped_segments == 1 and len(batch.items) == 15  # the first, then the third
    first.unlink()
    batch = read_batch(spool, Position(1, 100), max_items=1000, max_bytes=1 << 20)
    assert batch.skipped_segments == 2 and len(batch.items) == 20


def test_a_partial_last_line_is_torn_only_once_its_segment_is_sealed(spool: Path) -> None:
    write_samples(spool, [make_sample(i) for i in range(3)])
    (segment,) = list_segments(spool)
    size = segment.stat().st_size
    with segment.open("ab") as fh:
        fh.write(b'{"@timestamp":"2026-')  # a writer killed mid-line, or still writing it
    open_batch = read_batch(spool, Position(1, 0), max_items=100)
    assert len(open_batch.items) == 3 and open_batch.end == Position(1, size)  # waits for more
    sealed = read_batch(spool, Position(1, 0), max_items=100, sealed_upto=1)  # writer gone
    assert len(sealed.items) == 3 and sealed.malformed == 1
    assert sealed.end == Position(1, segment.stat().st_size)
