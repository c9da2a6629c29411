"""Reads the spool for one output from its position: records, skipped lines, and where it ends."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from log_pipeline.checkpoint import Position
from log_pipeline.outputs import Item
from log_pipeline.spool import TornLine, list_segments, read_lines, segment_name, segment_seq
from tokenpulse.logging import get_logger

log = get_logger(__name__)


@dataclass(slots=True)
class Batch:
    """Records read, lines and missing segments skipped, and the position after them."""

    items: list[Item] = field(default_factory=list)
    malformed: int = 0
    skipped_segments: int = 0  # segments gone before this output read them: their records lost
    end: Position = Position(0, 0)
    bytes: int = 0


# the sink writes every record with this head: the id and time come out without a full parse
_HEAD = re.compile(
    rb'^\{"@timestamp":"([0-9T:.Z-]{20,30})","message":"[^"\\]*","event":\{"id":"([0-9a-f]{32})"'
)


def parse_line(data: bytes) -> Item | None:
    """A spool line as an item; None when it is not a record."""
    head = _HEAD.match(data)
    if head is not None and data.endswith(b"}"):
        return Item(head.group(2).decode(), None, data, head.group(1).decode())
    try:
        doc = json.loads(data)
        record_id = doc["event"]["id"]
        doc["@timestamp"]  # noqa: B018 - required by every store
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(record_id, str) or not record_id:
        return None
    return Item(record_id, doc, data)


def start_position(spool_dir: Path) -> Position:
    """The position of the oldest segment's first byte."""
    segments = list_segments(spool_dir)
    return Position(segment_seq(segments[0]) if segments else 0, 0)


def _skip(batch: Batch, spool_dir: Path, first: int, upto: int) -> None:
    """Segments `first`..`upto - 1` are gone before this output read them: count and say so."""
    if upto > first:
        batch.skipped_segments += upto - first
        log.error("spool segments missing before this output read them; their records are lost "
                  "to it", spool=str(spool_dir), first=segment_name(first),
                  last=segment_name(upto - 1), segments=upto - first)  # fmt: skip


def read_batch(
    spool_dir: Path, pos: Position, max_items: int, max_bytes: int = 5 << 20, sealed_upto: int = 0
) -> Batch:
    """Up to `max_items` records and about `max_bytes` (at least one record) from `pos`, moving
    on to newer segments as each is finished. A segment missing on the way (deleted by hand, or
    by a shipper that did not know this output) is skipped, counted and logged. Segments up to
    `sealed_upto` will not grow (their writer is gone): a partial last line there is torn."""
    batch = Batch(end=pos)
    while len(batch.items) < max_items:
        segments = list_segments(spool_dir)
        seqs = [segment_seq(p) for p in segments]
        newer = [s for s in seqs if s > batch.end.seq]
        if batch.end.seq not in seqs:
            if not newer:
                break  # caught up (or nothing written yet)
            if batch.end.seq > 0:  # 0: the start of an empty spool, never a segment
                _skip(batch, spool_dir, batch.end.seq, newer[0])
            batch.end = Position(newer[0], 0)
            continue
        path = spool_dir / segment_name(batch.end.seq)
        before = batch.end
        try:
            final = bool(newer) or batch.end.seq <= sealed_upto
            for line in read_lines(path, batch.end.offset, final=final):
                if isinstance(line, TornLine):
                    batch.malformed += 1
                    log.warning("torn spool line skipped", segment=path.name, offset=line.start)
                    batch.end = Position(batch.end.seq, line.end)
                    continue
                item = parse_line(line.data)
                if item is not None and batch.items and batch.bytes + len(item.raw) > max_bytes:
                    return batch  # this line starts the next batch
                if item is None:
                    batch.malformed += 1
                    log.warning(
                        "malformed spool line skipped", segment=path.name, offset=batch.end.offset
                    )
                else:
                    batch.items.append(item)
                    batch.bytes += len(item.raw)
                batch.end = Position(batch.end.seq, line.end)
                if len(batch.items) >= max_items:
                    return batch
        except FileNotFoundError:
            pass  # deleted under us: every output had acknowledged it
        if batch.end == before:
            if not newer:
                break  # at the end of the newest segment: wait for more
            _skip(batch, spool_dir, batch.end.seq + 1, newer[0])
            batch.end = Position(newer[0], 0)
    return batch
