"""The writer process's loop: it writes all it is sent, whoever reads its reports."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

from log_pipeline import sidecar
from log_pipeline.settings import SinkSettings
from log_pipeline.wire import FrameReader, HandledCount, frame, to_wire
from tests.log_pipeline.conftest import make_sample
from tests.log_pipeline.support import wait_until
from tests.log_pipeline.test_writer import records


def _serve(
    spool: Path, rules: Path, stdin: int, report: int, handled: HandledCount | None = None
) -> list[int]:
    settings = SinkSettings.model_validate({"spool_dir": spool, "rules_file": rules})
    status: list[int] = []
    thread = threading.Thread(
        target=lambda: status.append(sidecar.serve(settings, stdin, report, handled))
    )
    thread.start()
    thread.join(60)
    return status  # empty if it raised (or still runs)


def _send(fd: int, first: int, n: int) -> None:
    os.write(fd, frame([to_wire(make_sample(i)) for i in range(first, first + n)]))


def test_a_gone_gateway_does_not_stop_the_writing(
    spool: Path, keep_all: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sidecar, "_REPORT_EVERY_S", 0.0)  # a report after every read
    stdin_r, stdin_w = os.pipe()
    report_r, report_w = os.pipe()
    os.close(report_r)  # nobody reads the reports: each write would be EPIPE
    for first in (0, 100, 200):
        _send(stdin_w, first, 100)
    os.close(stdin_w)
    try:
        assert _serve(spool, keep_all, stdin_r, report_w) == [0]
    finally:
        os.close(stdin_r)
        os.close(report_w)
    assert [r["genai_sample"]["request_id"] for r in records(spool)] == [  # type: ignore[index]
        f"req-{i}" for i in range(300)
    ]


def test_the_handled_count_is_shared_memory_not_a_report(spool: Path, keep_all: Path) -> None:
    """The gateway learns what the writer handled from memory both map, with no report to wake
    it: with the report pipe closed, the count is still there, and it reads it from its own
    mapping of the same memory."""
    stdin_r, stdin_w = os.pipe()
    report_r, report_w = os.pipe()
    os.close(report_r)  # no reports can be read at all
    gateway_side, fd = HandledCount.create()
    writer_side = HandledCount(fd)  # as the writer maps the descriptor it was passed
    os.close(fd)
    for first in (0, 100, 200):
        _send(stdin_w, first, 100)
    os.close(stdin_w)
    try:
        assert _serve(spool, keep_all, stdin_r, report_w, writer_side) == [0]
    finally:
        os.close(stdin_r)
        os.close(report_w)
    assert gateway_side.value == 300 == len(records(spool))


def test_reports_say_ready_then_count_and_a_foreign_stream_stops_it(
    spool: Path, keep_all: Path
) -> None:
    stdin_r, stdin_w = os.pipe()
    report_r, report_w = os.pipe()
    _send(stdin_w, 0, 5)
    os.write(stdin_w, b"\x00\x00\x00\x04junk")  # not a pickle: the writer stops reading
    os.close(stdin_w)
    handled, fd = HandledCount.create()
    os.close(fd)  # the mapping stays
    try:
        assert _serve(spool, keep_all, stdin_r, report_w, handled) == [1]
        os.close(report_w)
        report_w = -1
        messages = FrameReader().feed(os.read(report_r, 1 << 22))
    finally:
        for fd in (stdin_r, report_r, report_w):
            if fd >= 0:
                os.close(fd)
    assert messages[0][0] == "ready" and messages[-1][0] == "metrics"
    written = [
        s.value for m in messages[-1][1] for s in m.samples
        if s.name == "tokenpulse_spool_records_written_total"
    ]  # fmt: skip
    assert written == [5.0] and len(records(spool)) == 5
    assert handled.value == 5  # what came before the bad frame counts as handled


def test_one_writer_per_spool_the_next_waits_then_gives_up_with_the_holder(
    spool: Path, keep_all: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sidecar, "_LOCK_WAIT_S", 0.3)
    spool.mkdir(exist_ok=True)
    held = os.open(spool / sidecar.LOCK_FILE, os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)  # another writer, still draining
    os.pwrite(held, b"4242\n", 0)
    stdin_r, stdin_w = os.pipe()
    report_r, report_w = os.pipe()
    try:
        assert _serve(spool, keep_all, stdin_r, report_w) == [1]
        ((kind, message),) = FrameReader().feed(os.read(report_r, 1 << 16))
        assert kind == "error" and "in use by another sample writer (pid 4242)" in message
        os.close(held)  # the other writer exits: the next one starts and writes
        _send(stdin_w, 0, 3)
        os.close(stdin_w)
        assert _serve(spool, keep_all, stdin_r, report_w) == [0]
    finally:
        for fd in (stdin_r, report_r, report_w):
            os.close(fd)
    assert len(records(spool)) == 3
    assert (spool / sidecar.LOCK_FILE).read_text() == f"{os.getpid()}\n"


def test_a_drained_pipe_is_read_again_after_a_pause_a_half_full_one_at_once(
    spool: Path, keep_all: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between reads of a drained pipe the writer sleeps (frames gather in the pipe, and no frame
    wakes it); a pipe more than half full it reads again without a pause."""
    pauses: list[None] = []
    monkeypatch.setattr(sidecar, "_gather", lambda: pauses.append(None))  # count, do not sleep
    stdin_r, stdin_w = os.pipe()
    report_r, report_w = os.pipe()
    os.close(report_r)
    half = sidecar._pipe_bytes(stdin_w) // 2
    small = frame([to_wire(make_sample(0))])
    os.write(stdin_w, small)  # a few hundred bytes: then a pause
    thread = threading.Thread(target=_serve, args=(spool, keep_all, stdin_r, report_w))
    thread.start()
    wait_until(lambda: bool(pauses), "the first pause")
    assert len(pauses) == 1
    big = b"".join(frame([to_wire(make_sample(i))]) for i in range(1, 10_000))
    assert len(big) > 2 * half  # more than a full pipe: reads of it come whole, no pause
    os.set_blocking(stdin_w, True)
    os.write(stdin_w, big)
    os.close(stdin_w)
    thread.join(60)
    os.close(stdin_r)
    os.close(report_w)
    assert len(records(spool)) == 10_000
    # `big` came in ~26 reads of a full pipe (the writer is slower than this thread's write):
    # no pause between them, one after its tail at most
    assert 1 <= len(pauses) <= 1 + 4


def test_the_pipe_size_is_asked_of_the_pipe(tmp_path: Path) -> None:
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, 1031, 1 << 17)  # F_SETPIPE_SZ
        assert sidecar._pipe_bytes(r) == 1 << 17
    finally:
        os.close(r)
        os.close(w)
    with open(tmp_path / "file", "wb") as f:  # not a pipe: Linux's default is assumed
        assert sidecar._pipe_bytes(f.fileno()) == 1 << 16
