"""The gateway-side sink: sample, redact and append to the spool on a background thread.

Load it with `TOKENPULSE_GATEWAY_SAMPLE_SINK=log_pipeline.sink:make_sink` (settings from
`TOKENPULSE_SINK_*`). `handle` only appends the sample to a bounded deque (no lock, no wake-up, no
dict or JSON work on the event loop), so the loop never waits on disk; a full queue or a full
spool drops the sample and counts it. The writer thread wakes every few milliseconds, takes all
that waits, and samples, redacts and encodes the whole batch before one append: under load it asks
the loop for the GIL once per batch, not once per request.
"""

from __future__ import annotations

import atexit
import random
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from log_pipeline.metrics import (
    KEEP_REASONS,
    REDACTION_KINDS,
    SAMPLER_DROP_REASONS,
    SPOOL_DROP_REASONS,
    SinkMetrics,
)
from log_pipeline.record import encode_records
from log_pipeline.redact import redact_all
from log_pipeline.sampler import Sampler, load_rules
from log_pipeline.settings import SinkSettings
from log_pipeline.spool import SpoolFull, SpoolWriter
from serving.gateway.sink import Sample
from tokenpulse.logging import get_logger
from tokenpulse.threaded_http import serve_metrics

log = get_logger(__name__)
_BATCH = 512
_BATCH_WAIT_S = 0.02
_HOUSEKEEPING_S = 0.25


@dataclass(frozen=True, slots=True)
class _Lines:
    """One kept request, encoded: its spool lines and what the metrics count once it is written."""

    data: bytes
    records: int
    reason: str
    redactions: Counter[str]


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
        self._pending: deque[Sample] = deque()  # append/popleft are atomic: no lock needed
        self._stop = threading.Event()
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
        if len(self._pending) >= self.settings.queue_size:
            self._dropped["queue_full"].inc()
            return False
        self._pending.append(sample)
        return True

    def _take(self) -> list[Sample]:
        batch: list[Sample] = []
        pending = self._pending
        while pending and len(batch) < _BATCH:
            batch.append(pending.popleft())
        return batch

    def _run(self) -> None:
        last_housekeeping = 0.0
        while True:
            stopping = self._stop.is_set()  # read first: what was queued before it is written
            batch = self._take()
            if batch:
                try:
                    self.write_batch(batch)
                except Exception:  # noqa: BLE001 - a failure must not stop the writer
                    self._dropped["write_error"].inc(len(batch))
                    log.exception("samples not written", samples=len(batch))
            self.metrics.queue_depth.set(len(self._pending))
            now = time.monotonic()
            if now - last_housekeeping >= _HOUSEKEEPING_S:
                self._housekeeping()
                last_housekeeping = now
            if stopping and not self._pending:
                break
            if len(batch) < _BATCH:
                self._stop.wait(_BATCH_WAIT_S)  # let samples gather; adds at most this delay
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
        """Sample, redact and append one request; True when written."""
        return self.write_batch([sample]) == 1

    def _encode(self, sample: Sample) -> _Lines | None:
        """The redacted spool lines of one request (None when not kept)."""
        decision = self.sampler.decide(sample.stats)
        if not decision.keep:
            self._skipped[decision.skipped].inc()
            return None
        counts: Counter[str] = Counter()
        prompts = redact_all(sample.prompts, counts)
        outputs = redact_all(sample.outputs, counts)
        data, records = encode_records(
            sample, prompts, outputs, decision.reasons, self.sampler.rules.head_rate, counts
        )
        return _Lines(data, records, decision.reasons[0], counts)

    def write_batch(self, samples: list[Sample]) -> int:
        """Sample, redact and append requests in one write (on the writer thread); how many
        requests were written. Nothing reaches disk before it is redacted."""
        started = time.perf_counter()
        chunks: list[_Lines] = []
        for sample in samples:
            try:
                lines = self._encode(sample)
            except Exception:  # noqa: BLE001 - one bad sample must not stop the others
                self._dropped["write_error"].inc()
                log.exception("sample not written", request_id=sample.stats.request_id)
                continue
            if lines is not None:
                chunks.append(lines)
        if not chunks:
            return 0
        written = self._append(chunks)
        if not written:
            return 0
        redacted: Counter[str] = Counter()
        for lines in written:
            self._kept[lines.reason].inc()
            redacted.update(lines.redactions)
        for kind, n in redacted.items():
            self._redacted[kind].inc(n)
        self.metrics.written.inc(sum(lines.records for lines in written))
        self.metrics.written_bytes.inc(sum(len(lines.data) for lines in written))
        per_sample = (time.perf_counter() - started) / len(chunks)
        for _ in written:
            self.metrics.write_duration.observe(per_sample)
        return len(written)

    def _append(self, chunks: list[_Lines]) -> list[_Lines]:
        """Append the requests' lines in one write; at the cap, one request at a time, so that
        exactly those over it are dropped. The requests written."""
        try:
            with self._writer_lock:
                self.writer.append(b"".join(lines.data for lines in chunks))
            return chunks
        except SpoolFull:
            pass  # some may still fit
        except OSError:
            log.exception("spool append failed; retrying one request at a time")
        written = []
        for lines in chunks:
            try:
                with self._writer_lock:
                    self.writer.append(lines.data)
            except SpoolFull:
                self._dropped["disk_cap"].inc(lines.records)
                continue
            except OSError:
                self._dropped["write_error"].inc(lines.records)
                log.exception("spool append failed", requests=1)
                continue
            written.append(lines)
        return written

    def close(self, timeout_s: float = 5.0) -> None:
        """Write what is queued, flush, and stop the thread."""
        if not self._thread.is_alive():
            return
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.warning("sample writer did not drain before shutdown", left=len(self._pending))


def make_sink(registry: CollectorRegistry | None = None) -> SpoolSink:
    """The gateway hook's factory: settings from TOKENPULSE_SINK_*, metrics on `registry`."""
    settings = SinkSettings.model_validate({})  # from TOKENPULSE_SINK_* and defaults
    sink = SpoolSink(settings, registry=registry)
    if settings.metrics_port:  # its own /metrics too, e.g. when the host passes no registry
        serve_metrics("127.0.0.1", settings.metrics_port, sink.registry)
    atexit.register(sink.close)
    log.info(
        "sample sink ready",
        spool_dir=str(settings.spool_dir),
        head_rate=sink.sampler.rules.head_rate,
    )
    return sink
