"""The sink's writer process: samples in on stdin, redacted records out to the spool.

The gateway's sink starts it as
`python -m log_pipeline.sidecar REPORT_FD COUNT_FD SETTINGS_JSON LOG_LEVEL` and writes frames of
samples to its stdin. Sampling, redaction and encoding cost about 0.1 ms of Python per request.
In a thread of the gateway they shared the global interpreter lock with the event loop: at 100 %
sampling the gateway lost a fifth of its throughput. Here they share nothing. The process:
- reports `("ready", families)` once the spool is open, or `("error", text)` and exits 1;
- then reports its metric families on REPORT_FD a few times a second, and once more at the end;
- stores how many samples it has handled (written, skipped or dropped, each counted) in the
  memory COUNT_FD maps (`wire.HandledCount`) after every read, so when it dies the gateway counts
  the samples it had handed over and the writer never handled; nothing wakes the gateway for it;
- ignores SIGINT and SIGTERM (a terminal's Ctrl-C, a stop): it writes what it was sent and exits
  when stdin closes, which happens however the gateway ends (SIGKILL included);
- runs in a session of its own and lowers its CPU priority (`writer_nice`), its session's too
  where Linux groups CPU by session, so under contention the gateway's requests (and every other
  process's) come first and samples wait in the pipe instead.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any

from prometheus_client import disable_created_metrics
from pydantic import ValidationError

from log_pipeline.sampler import RulesError
from log_pipeline.settings import SinkSettings
from log_pipeline.wire import (
    FrameError,
    FrameReader,
    HandledCount,
    feedback_from_wire,
    frame,
    from_wire,
    is_feedback,
)
from log_pipeline.writer import SampleWriter
from tokenpulse.logging import configure_logging, get_logger

log = get_logger(__name__)
_REPORT_EVERY_S = 0.25
_LOCK_WAIT_S = 30.0
LOCK_FILE = "writer.lock"
_READ = 1 << 20
# Once it has drained its pipe (and written what it read) the writer sleeps this long rather
# than wait on the pipe, where every frame the gateway writes would wake it, at a cost to the
# gateway's loop (figures: log_pipeline/README.md, "Reads in gulps"). Samples wait in the pipe
# meanwhile; a pipe more than half full is read again at once, so the pause never caps the rate.
_GATHER_S = 0.2
_F_GETPIPE_SZ = 1032


def _report(fd: int, message: tuple[str, Any]) -> bool:
    """Send one report; False when nobody reads them any more (the gateway is gone)."""
    data = memoryview(frame(message))
    try:
        while data:  # blocking writes: the gateway's reader thread is always reading
            data = data[os.write(fd, data) :]
    except BrokenPipeError:
        return False
    return True


def _gather() -> None:
    """The pause after a read that drained the pipe (see `_GATHER_S`)."""
    time.sleep(_GATHER_S)


def _pipe_bytes(fd: int) -> int:
    """The capacity of the pipe `fd` reads (64 KiB, Linux's default, when it cannot be asked)."""
    try:
        return int(fcntl.fcntl(fd, _F_GETPIPE_SZ))
    except OSError:  # not a pipe (a test's file), or not Linux
        return 1 << 16


def _families(writer: SampleWriter) -> list[Any]:
    return list(writer.registry.collect())


def _lock(spool_dir: Path) -> int:
    """Become the spool's only writer: an exclusive lock on `writer.lock` in it, held until exit.

    A gateway restarted at once starts a new writer while the old one still writes what it was
    sent; two writers would both open segment N+1, and the shipper would finish and delete a
    segment the other still appends to. So the new one waits. The lock file holds the pid."""
    spool_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(spool_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + _LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                os.close(fd)
                raise OSError(f"spool {spool_dir} is in use by another sample writer (pid "
                              f"{holder}) for over {_LOCK_WAIT_S:.0f} s") from None  # fmt: skip
            time.sleep(0.05)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def serve(
    settings: SinkSettings, stdin: int, report: int, handled: HandledCount | None = None
) -> int:
    """Write every sample that arrives on `stdin` until it closes, storing the running count in
    `handled`; the exit status."""
    try:
        lock = _lock(settings.spool_dir)
    except OSError as exc:
        _report(report, ("error", f"sample writer cannot start: {exc}"))
        return 1
    try:
        return _serve(settings, stdin, report, handled)
    finally:
        os.close(lock)  # releases the lock


def _serve(settings: SinkSettings, stdin: int, report: int, handled: HandledCount | None) -> int:
    try:
        writer = SampleWriter(settings)
    except (RulesError, OSError) as exc:
        _report(report, ("error", f"sample writer cannot start: {exc}"))
        return 1
    reporting = _report(report, ("ready", _families(writer)))
    frames = FrameReader()
    pipe_bytes = _pipe_bytes(stdin)
    status = 0
    last_report = time.monotonic()
    done = 0  # handled so far
    while True:
        wait = last_report + _REPORT_EVERY_S - time.monotonic()
        readable, _, _ = select.select([stdin], [], [], max(0.0, wait))
        data = os.read(stdin, _READ) if readable else None
        if data:
            bad = ""
            try:
                batches = frames.feed(data)
            except FrameError as exc:  # only a bug could do this
                batches, bad = exc.messages, str(exc)
            items = [s for batch in batches for s in batch]
            samples = [from_wire(s) for s in items if not is_feedback(s)]
            if samples:
                writer.write_batch(samples)
            for item in items:
                if is_feedback(item):
                    writer.feedback(feedback_from_wire(item))
            done += len(items)  # feedback counts as handed and handled, as samples do
            if handled is not None:
                handled.store(done)
            if bad:  # what came before it is written (and counted); stop reading
                log.error("sample stream unreadable; stopping", error=bad)
                status = 1
                break
        if time.monotonic() - last_report >= _REPORT_EVERY_S:
            writer.housekeeping()
            # a dead gateway reads no reports: what it sent is still written
            reporting = reporting and _report(report, ("metrics", _families(writer)))
            last_report = time.monotonic()
        if data == b"":  # the gateway closed the pipe (or died): all it sent is written
            break
        if data and len(data) < pipe_bytes // 2:  # drained: let samples gather
            _gather()
    if frames.partial:  # a frame cut off by the gateway's death: its samples are not counted
        log.warning("sample stream ended inside a frame", bytes=frames.partial)
    writer.close()
    if reporting:
        _report(report, ("metrics", _families(writer)))
    return status


def _nice_session(nice: int) -> None:
    """Where Linux shares CPU between sessions first (autogroup, on by default in Debian and most
    distributions), a process's nice ranks it only against the processes of its own session
    (sched(7)): in the gateway's session, nice 19 made the writer yield to its gateway and to
    nothing else on the host. The sink starts it in a session of its own; this gives that
    session the nice too, so it yields to every other. Only as the session's leader: run by hand
    inside a shell's session, it must not lower the shell's."""
    if os.getsid(0) != os.getpid():
        return
    try:
        Path("/proc/self/autogroup").write_text(f"{nice}\n")
    except OSError:
        pass  # no autogroup here (a container's cgroup decides): the process nice stands alone


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m log_pipeline.sidecar REPORT_FD COUNT_FD SETTINGS LOG_LEVEL`."""
    args = sys.argv[1:] if argv is None else argv
    report = int(args[0])
    count_fd = int(args[1])
    handled = HandledCount(count_fd)
    os.close(count_fd)  # the mapping stays
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        settings = SinkSettings.model_validate_json(args[2])
    except ValidationError as exc:
        _report(report, ("error", f"sample writer settings: {exc}"))
        return 1
    configure_logging("sample-writer", args[3])
    disable_created_metrics()  # as the gateway, whose /metrics shows these families
    if settings.writer_nice:
        os.nice(settings.writer_nice)
        _nice_session(settings.writer_nice)
    try:
        return serve(settings, sys.stdin.fileno(), report, handled)
    finally:
        os.close(report)


if __name__ == "__main__":
    sys.exit(main())
