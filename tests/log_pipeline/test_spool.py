"""Spool segments: append, rotation by size and age, the disk cap, fsync policies."""

from __future__ import annotations

from pathlib import Path

import pytest

from log_pipeline.spool import (
    FsyncPolicy,
    Line,
    SpoolFull,
    SpoolWriter,
    TornLine,
    list_segments,
    read_lines,
)


def _line(n: int, size: int = 100) -> bytes:
    return (f'{{"n":{n},"pad":"' + "x" * size + '"}\n').encode()


def test_rotates_by_size(spool: Path) -> None:
    w = SpoolWriter(spool, segment_max_bytes=1000, fsync=FsyncPolicy.NEVER)
    for i in range(30):
        w.append(_line(i))
    w.close()
    segments = list_segments(spool)
    assert len(segments) > 2
    assert all(p.stat().st_size <= 1000 for p in segments)
    lines = [ln for p in segments for ln in read_lines(p, 0, final=True)]
    assert len(lines) == 30 and all(isinstance(ln, Line) for ln in lines)


def test_rotates_by_age(spool: Path) -> None:
    now = [0.0]
    w = SpoolWriter(spool, segment_max_age_s=10, fsync=FsyncPolicy.NEVER, clock=lambda: now[0])
    w.append(_line(1))
    now[0] = 5.0
    w.append(_line(2))
    now[0] = 11.0
    w.tick()  # an idle, aged segment is closed so the shipper can finish it
    w.append(_line(3))
    w.close()
    assert [p.stat().st_size for p in list_segments(spool)][0] == 2 * len(_line(1))
    assert len(list_segments(spool)) == 2


def test_disk_cap_refuses_and_recovers_after_deletion(spool: Path) -> None:
    w = SpoolWriter(spool, segment_max_bytes=500, cap_bytes=1200, fsync=FsyncPolicy.NEVER)
    written = 0
    with pytest.raises(SpoolFull):
        for i in range(100):
            w.append(_line(i))
            written += 1
    assert 0 < written < 100
    list_segments(spool)[0].unlink()  # the shipper deleted an acknowledged segment
    w.append(_line(999))
    w.close()


def test_fsync_always_syncs_each_append(spool: Path) -> None:
    w = SpoolWriter(spool, fsync=FsyncPolicy.ALWAYS)
    for i in range(3):
        w.append(_line(i))
    assert w.stats.fsyncs == 3
    w.close()


def test_fsync_interval(spool: Path) -> None:
    now = [0.0]
    w = SpoolWriter(spool, fsync=FsyncPolicy.INTERVAL, fsync_interval_s=1.0, clock=lambda: now[0])
    w.append(_line(1))
    w.append(_line(2))
    assert w.stats.fsyncs == 0
    now[0] = 1.5
    w.tick()
    assert w.stats.fsyncs == 1
    w.close()


def test_new_writer_starts_a_new_segment(spool: Path) -> None:
    SpoolWriter(spool, fsync=FsyncPolicy.NEVER).append(_line(1))
    w = SpoolWriter(spool, fsync=FsyncPolicy.NEVER)
    w.append(_line(2))
    w.close()
    assert len(list_segments(spool)) == 2


def test_partial_last_line_is_torn_only_in_a_finished_segment(tmp_path: Path) -> None:
    path = tmp_path / "seg"
    path.write_bytes(_line(1) + b'{"n":2,"pa')
    assert [type(x) for x in read_lines(path, 0, final=False)] == [Line]
    got = list(read_lines(path, 0, final=True))
    assert isinstance(got[1], TornLine) and got[1].end == path.stat().st_size
