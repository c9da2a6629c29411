"""The durable spool: append-only JSON-lines segment files, rotated by size and age, with a cap.

The writer (gateway side) only ever appends to the newest segment, and a new writer always starts
a new segment, so a line without its newline in any segment but the newest is a torn write from a
crash. Readers (the shipper) skip and count such lines. Only the shipper deletes segments, once
every output has acknowledged them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from tokenpulse.atomic import fsync_directory

PREFIX = "seg-"
SUFFIX = ".jsonl"


class FsyncPolicy(StrEnum):
    """When appended lines are forced to disk."""

    ALWAYS = "always"  # every record: nothing acknowledged by the writer is lost on power loss
    INTERVAL = "interval"  # at most every `fsync_interval_s`
    NEVER = "never"  # leave it to the OS (a process crash still loses nothing written)


class SpoolFull(Exception):
    """The spool reached its disk cap."""


def segment_name(seq: int) -> str:
    """The file name of segment number `seq` (names sort in write order)."""
    return f"{PREFIX}{seq:012d}{SUFFIX}"


def segment_seq(path: Path) -> int:
    """The number in a segment's file name."""
    return int(path.name[len(PREFIX) : -len(SUFFIX)])


def list_segments(directory: Path) -> list[Path]:
    """Segments in write order."""
    return sorted(directory.glob(f"{PREFIX}*{SUFFIX}"))


STATE_DIR = "state"  # the shipper's default state directory inside the spool
WRITER_LOCK = "writer.lock"  # flocked by the spool's only writer (log_pipeline.sidecar)
DEADLETTERS = "deadletter-*.jsonl"  # log_pipeline.deadletter's files


def spool_bytes(directory: Path) -> int:
    """Bytes held by the segments and by the shipper's dead letters in `<spool>/state` (files
    deleted meanwhile count as 0): the disk cap bounds both."""
    total = 0
    for path in [*list_segments(directory), *(directory / STATE_DIR).glob(DEADLETTERS)]:
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            continue
    return total


@dataclass(slots=True)
class WriterStats:
    """What the writer did (the sink turns these into metrics)."""

    fsyncs: int = 0
    rotations: int = 0


class SpoolWriter:
    """Appends lines to the newest segment; one thread only."""

    def __init__(
        self,
        directory: Path,
        *,
        segment_max_bytes: int = 16 << 20,
        segment_max_age_s: float = 60.0,
        cap_bytes: int = 1 << 30,
        fsync: FsyncPolicy = FsyncPolicy.INTERVAL,
        fsync_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = directory
        self.segment_max_bytes = segment_max_bytes
        self.segment_max_age_s = segment_max_age_s
        self.cap_bytes = cap_bytes
        self.fsync = fsync
        self.fsync_interval_s = fsync_interval_s
        self.stats = WriterStats()
        self._clock = clock
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        existing = list_segments(directory)
        self._seq = segment_seq(existing[-1]) if existing else 0
        self._fd = -1
        self._seg_bytes = 0
        self._opened_at = 0.0
        self._last_fsync = clock()
        self._dirty = False
        self.size = spool_bytes(directory)
        self._size_checked = clock()

    def _open_next(self) -> None:
        self._close_current()
        self._seq += 1
        path = self.directory / segment_name(self._seq)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # prompts: private
        self._seg_bytes = 0
        self._opened_at = self._clock()
        self.stats.rotations += 1
        fsync_directory(self.directory)

    def _close_current(self) -> None:
        if self._fd >= 0:
            if self._dirty and self.fsync is not FsyncPolicy.NEVER:
                self._sync()
            os.close(self._fd)
            self._fd = -1

    def _sync(self) -> None:
        os.fsync(self._fd)
        self.stats.fsyncs += 1
        self._dirty = False
        self._last_fsync = self._clock()

    def refresh_size(self) -> int:
        """Re-read the spool's size from disk (the shipper deletes acknowledged segments)."""
        self.size = spool_bytes(self.directory)
        self._size_checked = self._clock()
        return self.size

    def append(self, lines: bytes) -> None:
        """Append whole lines (each ending in a newline) in one write; SpoolFull at the cap."""
        now = self._clock()
        if now - self._size_checked >= 1.0 or self.size + len(lines) > self.cap_bytes:
            self.refresh_size()
        if self.size + len(lines) > self.cap_bytes:
            raise SpoolFull(f"spool at its cap of {self.cap_bytes} bytes")
        if (
            self._fd < 0
            or (self._seg_bytes and self._seg_bytes + len(lines) > self.segment_max_bytes)
            or now - self._opened_at >= self.segment_max_age_s
        ):
            self._open_next()
        view = memoryview(lines)
        while view:  # O_APPEND writes of one buffer; loop only on a short write
            written = os.write(self._fd, view)
            view = view[written:]
        self._seg_bytes += len(lines)
        self.size += len(lines)
        self._dirty = True
        if self.fsync is FsyncPolicy.ALWAYS:
            self._sync()
        else:
            self.tick()

    def tick(self) -> None:
        """Housekeeping between records: interval fsync and age-based rotation of an idle file."""
        if self._fd < 0:
            return
        now = self._clock()
        if (
            self.fsync is FsyncPolicy.INTERVAL
            and self._dirty
            and now - self._last_fsync >= self.fsync_interval_s
        ):
            self._sync()
        if self._seg_bytes and now - self._opened_at >= self.segment_max_age_s:
            # close an idle, aged segment so the shipper may finish it and it can be deleted
            self._open_next()

    def segments(self) -> int:
        """Segment files on disk."""
        return len(list_segments(self.directory))

    def close(self) -> None:
        """Flush (per policy) and close."""
        self._close_current()


@dataclass(slots=True)  # not frozen: one is built per line read, and frozen inits are slower
class Line:
    """One complete line read from a segment, with the offset just past it."""

    data: bytes
    end: int


@dataclass(frozen=True, slots=True)
class TornLine:
    """A line cut by a crash (no newline, in a segment the writer has left)."""

    start: int
    end: int


def read_lines(
    path: Path, offset: int, final: bool, max_bytes: int = 4 << 20
) -> Iterator[Line | TornLine]:
    """Complete lines from `offset` (up to about `max_bytes`); a trailing partial line is reported
    torn only when `final` (a newer segment exists), else left for the next read."""
    with path.open("rb") as fh:
        fh.seek(offset)
        chunk = fh.read(max_bytes)
        while b"\n" not in chunk and len(chunk) == max_bytes:  # one line longer than max_bytes
            more_data = fh.read(max_bytes)
            if not more_data:
                break
            chunk += more_data
        more = bool(fh.read(1))
    pos = 0
    while True:
        nl = chunk.find(b"\n", pos)
        if nl < 0:
            break
        yield Line(chunk[pos:nl], offset + nl + 1)
        pos = nl + 1
    if pos < len(chunk) and final and not more:
        yield TornLine(offset + pos, offset + len(chunk))
