"""The gateway-side sink: hand samples to a writer process that samples, redacts and appends.

Load it with `TOKENPULSE_GATEWAY_SAMPLE_SINK=log_pipeline.sink:make_sink` (settings from
`TOKENPULSE_SINK_*`). On the event loop a sample costs a tuple and a list append: every 50 ms (or
every 512 samples) the list goes, pickled, down a non-blocking pipe to the writer process
(log_pipeline.sidecar), so the loop never waits on disk, nor on the writer's CPU. When
samples cannot be handed over (the pipe is full and `queue_size` samples wait), new ones are
dropped and counted. How many samples the writer has handled lives in memory both processes map,
so nothing wakes the gateway for it; the writer's metrics come back over a second pipe a few
times a second and appear on the host's registry, as if the work were done in the gateway; the
writer is restarted if it dies.
"""

from __future__ import annotations

import asyncio
import atexit
import fcntl
import logging
import os
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from pydantic import ValidationError

from log_pipeline.metrics import SinkMetrics
from log_pipeline.settings import SinkSettings
from log_pipeline.wire import (
    FrameError,
    FrameReader,
    HandledCount,
    WireSample,
    feedback_to_wire,
    frame,
    to_wire,
)
from tokenpulse.logging import get_logger
from tokenpulse.samples import Feedback, Sample
from tokenpulse.settings_cli import SettingsError, describe
from tokenpulse.threaded_http import serve_metrics

log = get_logger(__name__)
BATCH = 512
BATCH_WAIT_S = 0.05  # a frame and a pipe write per 50 ms under load, not per 20 ms
_START_TIMEOUT_S = 60.0
_RESTART_EVERY_S = 5.0
_PIPE_BYTES = 1 << 20  # Linux's default pipe-max-size for unprivileged processes
_F_SETPIPE_SZ = 1031


class SinkError(Exception):
    """The writer process could not start."""


class _Writer:
    """One writer process: its stdin, and a thread keeping its latest metric report."""

    def __init__(self, settings: SinkSettings, on_exit: Any) -> None:
        report_r, report_w = os.pipe()
        self._handled, count_fd = HandledCount.create()
        level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
        cmd = [sys.executable, "-m", "log_pipeline.sidecar", str(report_w), str(count_fd),
               settings.model_dump_json(), level]  # fmt: skip
        try:
            self.proc = subprocess.Popen(  # its own session: see log_pipeline.sidecar
                cmd, stdin=subprocess.PIPE, pass_fds=(report_w, count_fd), start_new_session=True
            )
        finally:
            os.close(report_w)
            os.close(count_fd)
        assert self.proc.stdin is not None
        self.fd = self.proc.stdin.fileno()
        try:  # a bigger pipe rides out longer stalls of the writer; the default works too
            fcntl.fcntl(self.fd, _F_SETPIPE_SZ, _PIPE_BYTES)
        except OSError:
            pass
        os.set_blocking(self.fd, False)
        self.families: list[Metric] | None = None
        self.error = ""
        # samples handed over in whole frames, and (`handled`) those the writer says it handled:
        # when it dies, the difference died with it (in its pipe, or read and not yet written)
        self.handed = 0
        self.accounted = False  # its loss is counted; samples handed after that count at once
        self.lock = threading.Lock()
        self.exited = False  # set by the report thread when the process has closed its end
        self.first = threading.Event()
        self._on_exit = on_exit
        self._thread = threading.Thread(
            target=self._read_reports, args=(report_r,), name="sample-writer-reports", daemon=True
        )
        self._thread.start()

    def _read_reports(self, fd: int) -> None:
        frames = FrameReader()
        try:
            while data := os.read(fd, 1 << 16):
                for kind, body in frames.feed(data):
                    if kind == "error":
                        self.error = body
                    else:
                        self.families = body
                    self.first.set()
        except (OSError, FrameError) as exc:
            log.error("sample writer reports unreadable", error=str(exc))
        finally:
            os.close(fd)
            self.exited = True
            self.first.set()
            self._on_exit(self)

    @property
    def handled(self) -> int:
        """Samples the writer has handled (final once it has exited)."""
        return self._handled.value

    def close(self, timeout_s: float) -> None:
        """Close its stdin (it writes what it has and exits), wait, then wait for its report."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("sample writer did not finish in time; killed")
            self.proc.kill()
            self.proc.wait()
        self._thread.join(timeout_s)


class _Mirror:
    """A collector showing the writer's metric families, with what the sink counts itself."""

    def __init__(self, own: CollectorRegistry, sink: SpoolSink) -> None:
        self._own = own
        self._sink = sink
        self._owned = {"tokenpulse_spool_queue_records", "tokenpulse_spool_writer_restarts"}

    def collect(self) -> Iterable[Metric]:
        """The writer's last report, with the sink's own families, and its drops added."""
        self._sink.metrics.queue_depth.set(self._sink.queued)
        own = {m.name: m for m in self._own.collect()}
        families = self._sink.writer.families or list(own.values())
        for family in families:
            if family.name in self._owned:
                yield own[family.name]
            elif family.name == "tokenpulse_spool_records_dropped":
                yield _add_totals(family, own[family.name])
            else:
                yield family


def _add_totals(family: Metric, extra: Metric) -> Metric:
    """A counter family with `extra`'s totals added, sample by sample."""
    more = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in extra.samples}
    out = Metric(family.name, family.documentation, family.type, family.unit)
    out.samples = [
        s._replace(value=s.value + more.get((s.name, tuple(sorted(s.labels.items()))), 0.0))
        if s.name.endswith("_total")
        else s
        for s in family.samples
    ]
    return out


class SpoolSink:
    """A `SampleSink` feeding a writer process; `handle` and `offer` run on one thread (the
    gateway's event loop)."""

    def __init__(self, settings: SinkSettings, registry: CollectorRegistry | None = None) -> None:
        self.settings = settings
        self.registry = registry or CollectorRegistry(auto_describe=False)
        own = CollectorRegistry(auto_describe=False)
        self.metrics = SinkMetrics(own)
        self._queue_full = self.metrics.dropped.labels("queue_full")
        self._lost = self.metrics.dropped.labels("write_error")
        self._pending: list[WireSample] = []
        self._queue_size = settings.queue_size
        self._batch = min(BATCH, settings.queue_size)
        self._frames: deque[tuple[memoryview, int]] = deque()  # unsent bytes, samples in them
        self._in_frames = 0
        self._head_sent = False  # the first frame is partly in the pipe
        self._flush_at: asyncio.TimerHandle | None = None
        self._watching: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._started = False  # a writer that fails at start-up is an error for the caller
        self._last_start = time.monotonic()
        self.writer = self._start(wait=True)
        self._started = True
        self.registry.register(_Mirror(own, self))

    def _start(self, wait: bool) -> _Writer:
        """A new writer process; with `wait`, only once it has opened the spool."""
        writer = _Writer(self.settings, self._exited)
        if wait and (not writer.first.wait(_START_TIMEOUT_S) or writer.families is None):
            writer.close(5.0)
            raise SinkError(writer.error or f"sample writer exited ({writer.proc.returncode})")
        return writer

    def _exited(self, writer: _Writer) -> None:
        """The writer's report pipe closed (it exited): count what died with it."""
        with writer.lock:
            lost = max(0, writer.handed - writer.handled)
            writer.accounted = True
        if lost:
            self._lost.inc(lost)
        if self._started and (lost or not self._closing):
            log.error("sample writer exited; samples handed to it and not written are lost",
                      samples=lost, returncode=writer.proc.wait(),
                      error=writer.error or None)  # fmt: skip

    @property
    def queued(self) -> int:
        """Samples not yet handed to the writer process."""
        return len(self._pending) + self._in_frames

    async def handle(self, sample: Sample) -> None:
        """Queue the sample for the writer; never blocks."""
        self.offer(sample)

    async def feedback(self, feedback: Feedback) -> None:
        """Queue feedback for the writer, in line with the samples; never blocks."""
        self.offer_feedback(feedback)

    def offer_feedback(self, feedback: Feedback) -> bool:
        """Queue feedback as a sample is queued (dropped and counted the same way)."""
        return self._queue(feedback_to_wire(feedback))

    def offer(self, sample: Sample) -> bool:
        """Queue a sample, or drop and count it when `queue_size` samples already wait."""
        # tuples now rather than the sample kept until the flush and encoded with its batch: tried,
        # the sample's objects then outlived collections, and the collector took back what the
        # warm batch saved
        return self._queue(to_wire(sample))

    def _queue(self, item: WireSample) -> bool:
        pending = self._pending
        if len(pending) + self._in_frames >= self._queue_size or self._closing:
            self._queue_full.inc()
            return False
        pending.append(item)
        if len(pending) >= self._batch:
            self.flush()
        elif self._flush_at is None:
            self._flush_later(BATCH_WAIT_S)
        return True

    def flush(self) -> None:
        """Hand what waits to the writer as far as the pipe takes it, without blocking."""
        if self._flush_at is not None:
            self._flush_at.cancel()
            self._flush_at = None
        if self._closing:  # close() hands over the rest itself
            return
        if self._pending:
            self._frames.append((memoryview(frame(self._pending)), len(self._pending)))
            self._in_frames += len(self._pending)
            self._pending = []
        if self.writer.exited and not self._replace_writer():
            return
        while self._frames:
            data, samples = self._frames[0]
            try:
                sent = os.write(self.writer.fd, data)
            except BlockingIOError:
                break
            except (OSError, ValueError):  # EPIPE: it died since the check above
                if self._replace_writer():
                    continue
                return
            if sent < len(data):
                self._frames[0] = (data[sent:], samples)
                self._head_sent = True
                break
            self._frames.popleft()
            self._in_frames -= samples
            self._head_sent = False
            self._handed(self.writer, samples)
        self._watch_pipe(bool(self._frames))

    def _handed(self, writer: _Writer, samples: int) -> None:
        """A whole frame is in the writer's pipe (if it already died, it died with it)."""
        with writer.lock:
            if not writer.accounted:
                writer.handed += samples
                return
        self._lost.inc(samples)

    def _watch_pipe(self, wanted: bool) -> None:
        """Flush again when the pipe has room (only while bytes wait, and only on a loop)."""
        if wanted and self._watching is None:
            try:
                self._watching = asyncio.get_running_loop()
            except RuntimeError:
                return
            self._watching.add_writer(self.writer.fd, self.flush)
        elif not wanted and self._watching is not None:
            if not self._watching.is_closed():  # at exit the gateway's loop is already gone
                self._watching.remove_writer(self.writer.fd)
            self._watching = None

    def _replace_writer(self) -> bool:
        """Start a new writer for a dead one; False while restarts wait (at most one every few
        seconds): samples stay queued meanwhile, and past `queue_size` new ones are dropped."""
        self._watch_pipe(False)
        if self._head_sent:  # a frame cut off inside the dead pipe: its samples are lost
            _, samples = self._frames.popleft()
            self._in_frames -= samples
            self._lost.inc(samples)
            self._head_sent = False
        wait = self._last_start + _RESTART_EVERY_S - time.monotonic()
        if wait > 0:
            self._flush_later(wait)
            return False
        self._last_start = time.monotonic()
        self.writer.close(1.0)
        self.metrics.writer_restarts.inc()
        self.writer = self._start(wait=False)  # the pipe holds samples until it is ready
        return True

    def _flush_later(self, delay_s: float) -> None:
        if self._flush_at is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # no loop (a script or test): flush() or close() hands it over
            self._flush_at = loop.call_later(delay_s, self.flush)

    def close(self, timeout_s: float = 10.0) -> None:
        """Hand over what waits (blocking now), let the writer finish, and collect its report."""
        if self._closing:
            return
        self.flush()
        self._watch_pipe(False)
        self._closing = True
        fd = self.writer.fd
        try:
            os.set_blocking(fd, True)
            while self._frames:
                data, samples = self._frames[0]
                while data:
                    data = data[os.write(fd, data) :]
                self._frames.popleft()
                self._in_frames -= samples
                self._handed(self.writer, samples)
        except OSError:
            log.error("samples not handed to the writer at shutdown", samples=self._in_frames)
            self._lost.inc(self._in_frames)
        self.writer.close(timeout_s)


def make_sink(registry: CollectorRegistry | None = None) -> SpoolSink:
    """The gateway hook's factory: settings from TOKENPULSE_SINK_*, metrics on `registry`."""
    try:
        settings = SinkSettings.model_validate({})  # from TOKENPULSE_SINK_* and defaults
        sink = SpoolSink(settings, registry=registry)
    except ValidationError as exc:  # the host's CLI prints these as one line and exits 2
        raise SettingsError(f"sample sink: {describe(exc, SinkSettings)}") from exc
    except SinkError as exc:  # the writer could not start (rules, spool), in its words
        raise SettingsError(f"sample sink: {exc}") from exc
    if settings.metrics_port:  # its own /metrics too, e.g. when the host passes no registry
        serve_metrics("127.0.0.1", settings.metrics_port, sink.registry)
    atexit.register(sink.close)
    log.info(
        "sample sink ready",
        spool_dir=str(settings.spool_dir),
        writer_pid=sink.writer.proc.pid,
        queue_size=settings.queue_size,
        writer_nice=settings.writer_nice,
    )
    return sink
