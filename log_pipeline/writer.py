"""Sample, redact, encode and append: the work behind the gateway's sink, in one class.

`SampleWriter` runs in the sink's writer process (log_pipeline.sidecar); tests and benches call
it directly. Nothing reaches disk before it is redacted. Not thread-safe: one caller at a time.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from log_pipeline.metrics import (
    KEEP_REASONS,
    REDACTION_KINDS,
    SAMPLER_DROP_REASONS,
    SPOOL_DROP_REASONS,
    SinkMetrics,
)
from log_pipeline.record import encode_records, new_sample_id
from log_pipeline.redaction.fields import redact_sample
from log_pipeline.sampler import Sampler, load_rules, max_new_tokens
from log_pipeline.settings import SinkSettings
from log_pipeline.spool import SpoolFull, SpoolWriter
from tokenpulse.logging import get_logger
from tokenpulse.samples import Sample

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class _Lines:
    """One kept request, encoded: its spool lines and what the metrics count once it is written."""

    data: bytes
    records: int
    reason: str
    redactions: Counter[str]


class SampleWriter:
    """Writes kept, redacted records of finished requests to the spool."""

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
        self.spool = SpoolWriter(
            settings.spool_dir,
            segment_max_bytes=settings.segment_max_bytes,
            segment_max_age_s=settings.segment_max_age_s,
            cap_bytes=settings.cap_bytes,
            fsync=settings.fsync,
            fsync_interval_s=settings.fsync_interval_s,
        )
        self.metrics.cap.set(settings.cap_bytes)
        m = self.metrics  # label children resolved once: they are touched per record
        self._kept = {r: m.kept.labels(r) for r in KEEP_REASONS}
        self._skipped = {r: m.skipped.labels(r) for r in SAMPLER_DROP_REASONS}
        self.dropped = {r: m.dropped.labels(r) for r in SPOOL_DROP_REASONS}
        self._redacted = {k: m.redactions.labels(k) for k in REDACTION_KINDS}
        self._fsyncs_seen = 0
        self.housekeeping()

    def write(self, sample: Sample) -> bool:
        """Sample, redact and append one request; True when written."""
        return self.write_batch([sample]) == 1

    def _encode(self, sample: Sample) -> _Lines | None:
        """The redacted spool lines of one request (None when not kept)."""
        decision = self.sampler.decide(sample.stats, max_new_tokens(sample.params))
        if not decision.keep:
            self._skipped[decision.skipped].inc()
            return None
        counts: Counter[str] = Counter()
        sample = redact_sample(sample, counts)  # every free-text field, not only the texts
        data, records = encode_records(
            sample,
            list(sample.prompts),
            list(sample.outputs),
            decision.reasons,
            self.sampler.rules.head_rate,
            counts,
            sample_id=new_sample_id(),
        )
        return _Lines(data, records, decision.reasons[0], counts)

    def write_batch(self, samples: list[Sample]) -> int:
        """Sample, redact and append requests in one write; how many requests were written."""
        started = time.perf_counter()
        chunks: list[_Lines] = []
        for sample in samples:
            try:
                lines = self._encode(sample)
            except Exception:  # noqa: BLE001 - one bad sample must not stop the others
                self.dropped["write_error"].inc()
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
            self.spool.append(b"".join(lines.data for lines in chunks))
            return chunks
        except SpoolFull:
            pass  # some may still fit
        except OSError:
            log.exception("spool append failed; retrying one request at a time")
        written = []
        for lines in chunks:
            try:
                self.spool.append(lines.data)
            except SpoolFull:
                self.dropped["disk_cap"].inc(lines.records)
                continue
            except OSError:
                self.dropped["write_error"].inc(lines.records)
                log.exception("spool append failed", requests=1)
                continue
            written.append(lines)
        return written

    def housekeeping(self) -> None:
        """Rotate and fsync by time, and refresh the spool gauges (call a few times a second)."""
        try:
            self.spool.tick()
        except OSError:
            log.exception("spool housekeeping failed")
        self.metrics.fsyncs.inc(self.spool.stats.fsyncs - self._fsyncs_seen)
        self._fsyncs_seen = self.spool.stats.fsyncs
        self.metrics.size.set(self.spool.size)
        self.metrics.segments.set(self.spool.segments())

    def close(self) -> None:
        """Flush and close the current segment."""
        self.spool.close()
        self.housekeeping()
