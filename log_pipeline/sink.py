"""The gateway-side sink: sample, redact and append to the spool on a background thread.

Load it with `TOKENPULSE_GATEWAY_SAMPLE_SINK=log_pipeline.sink:make_sink` (settings from
`TOKENPULSE_SINK_*`). `handle` only puts the sample on a bounded in-memory queue, so the event loop
never waits on disk; a full queue or a full spool drops the sample and counts it.
"""

from __future__ import annotations

import atexit
import json
import queue
import random
import threading
import time
from collections import Counter
from typing import cast

from prometheus_client import CollectorRegistry, start_http_server

from log_pipeline.metrics import (
    KEEP_REASONS,
    REDACTION_KINDS,
    SAMPLER_DROP_REASONS,
    SPOOL_DROP_REASONS,
    SinkMetrics,
)
from log_pipeline.record import build_records
from log_pipeline.redact import redact_all
from log_pipeline.sampler import Sampler, load_rules
from log_pipeline.settings import SinkSettings
from log_pipeline.spool import SpoolFull, SpoolWriter
from serving.gateway.sink import Sample
from tokenpulse.logging import get_logger

log = get_logger(__name__)
_STOP = object()
_BATCH = 256
_BATCH_WAIT_S = 0.02


class SpoolSink:
    """A `SampleSink` writing kept, redacted records to the spool from one writer thread."""

    def __init__(
        self,
        settings: SinkSettings,
        registry: CollectorRegistry | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry or CollectorRegistry(auto_describe=False)
        self.metrics = SinkMetrics(self.registry)
        self.sampler = Sampler(load_rules(settings.rules_file), rng=rng)
        self.writer = SpoolWriter(
            settings.spool_dir,
            segment_max_bytes=settings.segment_max_bytes,
            segment_max_age_s=settings.segment_max_age_s,
            cap_bytes=settings.cap_bytes,
            fsync=settings.fsync,
            fsync_interval_s=settings.fsync_interval_s,
        )
        self.metrics.cap.set(settings.cap_bytes)
        m = self.metrics  # label children resolved once: the writer touches them per record
        self._kept = {r: m.kept.labels(r) for r in KEEP_REASONS}
        self._skipped = {r: m.skipped.labels(r) for r in SAMPLER_DROP_REASONS}
        self._dropped = {r: m.dropped.labels(r) for r in SPOOL_DROP_REASONS}
        self._redacted = {k: m.redactions.labels(k) for k in REDACTION_KINDS}
        self._queue: queue.Queue[object] = queue.Queue(settings.queue_size)
        # the writer belongs to the writer thread; the lock only makes a direct write() from
        # another thread (tests, benches) safe against the thread's housekeeping
        self._writer_lock = threading.Lock()
        self._fsyncs_seen = 0
        self._thread = threading.Thread(target=self._run, name="sample-spool-writer", daemon=True)
        self._thread.start()

    async def handle(self, sample: Sample) -> None:
        """Queue the sample for the writer thread; never blocks."""
        self.offer(sample)

    def offer(self, sample: Sample) -> bool:
        """Queue a sample, or drop and count it when the writer is behind."""
        try:
            self._queue.put_nowait(sample)
        except queue.Full:
            self._dropped["queue_full"].inc()
            return False
        self.metrics.queue_depth.set(self._queue.qsize())
        return True

    def _run(self) -> None:
        stopping = False
        while not stopping:
            try:
                batch = [self._queue.get(timeout=0.25)]
            except queue.Empty:
                self._housekeeping()
                continue
            # Take what else is waiting: under load the thread wakes (and asks the event loop
            # for the GIL) once per batch, not once per request.
            while len(batch) < _BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            for item in batch:
                if item is _STOP:
                    stopping = True
                    continue
                sample = cast(Sample, item)  # only Samples and _STOP are queued
                try:
                    self.write(sample)
                except Exception:  # noqa: BLE001 - one bad sample must not stop the writer
                    self._dropped["write_error"].inc()
                    log.exception("sample not written", request_id=sample.stats.request_id)
            self.metrics.queue_depth.set(self._queue.qsize())
            if not stopping and len(batch) < _BATCH:
                time.sleep(_BATCH_WAIT_S)  # let a few samples gather; adds at most this delay
        with self._writer_lock:
            self.writer.close()
        self._housekeeping()

    def _housekeeping(self) -> None:
        try:
            with self._writer_lock:
                self.writer.tick()
        except OSError:
            log.exception("spool housekeeping failed")
        self.metrics.fsyncs.inc(self.writer.stats.fsyncs - self._fsyncs_seen)
        self._fsyncs_seen = self.writer.stats.fsyncs
        self.metrics.size.set(self.writer.size)
        self.metrics.segments.set(self.writer.segments())

    def write(self, sample: Sample) -> bool:
        """Sample, redact and append one request (on the writer thread); True when written."""
        started = time.perf_counter()
        decision = self.sampler.decide(sample.stats)
        if not decision.keep:
            self._skipped[decision.skipped].inc()
            return False
        counts: Counter[str] = Counter()
        prompts = redact_all(sample.prompts, counts)
        outputs = redact_all(sample.outputs, counts)
        records = build_records(
            sample, prompts, outputs, decision.reasons, self.sampler.rules.head_rate, counts
        )
        data = b"".join(
            json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
            for r in records
        )
        try:
            with self._writer_lock:
                self.writer.append(data)
        except SpoolFull:
            self._dropped["disk_cap"].inc(len(records))
            return False
        except OSError:
            self._dropped["write_error"].inc(len(records))
            log.exception("spool append failed", request_id=sample.stats.request_id)
            return False
        self._kept[decision.reasons[0]].inc()
        for kind, n in counts.items():
            self._redacted[kind].inc(n)
        self.metrics.written.inc(len(records))
        self.metrics.written_bytes.inc(len(data))
        self.metrics.write_duration.observe(time.perf_counter() - started)
        return True

    def close(self, timeout_s: float = 5.0) -> None:
        """Write what is queued, flush, and stop the thread."""
        if not self._thread.is_alive():
            return
        try:
            self._queue.put(_STOP, timeout=timeout_s)
        except queue.Full:
            log.warning("sample writer did not drain before shutdown", left=self._queue.qsize())
            return
        self._thread.join(timeout_s)


def make_sink(registry: CollectorRegistry | None = None) -> SpoolSink:
    """The gateway hook's factory: settings from TOKENPULSE_SINK_*, metrics on `registry`."""
    settings = SinkSettings.model_validate({})  # from TOKENPULSE_SINK_* and defaults
    sink = SpoolSink(settings, registry=registry)
    if settings.metrics_port:  # its own /metrics too, e.g. when the host passes no registry
        start_http_server(settings.metrics_port, addr="127.0.0.1", registry=sink.registry)
    atexit.register(sink.close)
    log.info(
        "sample sink ready",
        spool_dir=str(settings.spool_dir),
        head_rate=sink.sampler.rules.head_rate,
    )
    return sink
