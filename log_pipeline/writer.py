"""Sample, redact, encode and append: the work behind the gateway's sink, in one class.

`SampleWriter` runs in the sink's writer process (log_pipeline.sidecar); tests and benches call
it directly. Nothing reaches disk before it is redacted. Not thread-safe: one caller at a time.

Feedback makes a request always-keep, even one head sampling skipped: the writer holds skipped
requests in memory (never on disk, not yet redacted) for `feedback_window_s`, at most
`feedback_window_records` of them and about `feedback_window_bytes` of text, oldest forgotten
first. Feedback on a held request writes it as a sample (reason `feedback`) with the feedback in
its records; feedback on a request already kept, or no longer held, is a record of its own under
the response id. Each is counted by outcome (promoted, attached, late).
"""

from __future__ import annotations

import random
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from log_pipeline.metrics import (
    FEEDBACK_OUTCOMES,
    KEEP_REASONS,
    REDACTION_KINDS,
    SAMPLER_DROP_REASONS,
    SPOOL_DROP_REASONS,
    SinkMetrics,
)
from log_pipeline.record import (
    encode_feedback_record,
    encode_records,
    feedback_json,
    new_sample_id,
)
from log_pipeline.redaction.fields import redact_sample
from log_pipeline.redaction.text import redact_all
from log_pipeline.sampler import Sampler, load_rules, max_new_tokens
from log_pipeline.settings import SinkSettings
from log_pipeline.spool import SpoolFull, SpoolWriter
from tokenpulse.logging import get_logger
from tokenpulse.samples import Feedback, Sample

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class _Lines:
    """One kept request, encoded: its spool lines and what the metrics count once it is written."""

    data: bytes
    records: int
    reason: str
    redactions: Counter[str]


@dataclass(frozen=True, slots=True)
class _Held:
    """A skipped request held for feedback."""

    sample: Sample
    expires: float  # monotonic seconds
    size: int  # approximate bytes of its texts


_HELD_OVERHEAD = 512  # bytes of the stats and containers of one held request, roughly


def _held_size(sample: Sample) -> int:
    """About the bytes a held request's texts take (2 per non-ASCII character: cheap, and what
    CPython takes for most Chinese text)."""
    size = _HELD_OVERHEAD
    for text in (*sample.prompts, *sample.outputs):
        size += len(text) if text.isascii() else 2 * len(text)
    return size


class SampleWriter:
    """Writes kept, redacted records of finished requests to the spool."""

    def __init__(
        self,
        settings: SinkSettings,
        registry: CollectorRegistry | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._clock = clock
        # request id -> skipped request held for feedback; request id -> when its kept sample's
        # window ends (both oldest first)
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self._held_bytes = 0
        self._kept_recently: OrderedDict[str, float] = OrderedDict()
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
        self._feedback = {o: m.feedback.labels(o) for o in FEEDBACK_OUTCOMES}
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
            self._hold(sample)
            return None
        self._remember_kept(sample.stats.request_id)
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

    # ---- feedback ------------------------------------------------------------------------------

    def _hold(self, sample: Sample) -> None:
        """Hold a skipped request for the feedback window (within the bounds)."""
        s = self.settings
        if s.feedback_window_s <= 0 or s.feedback_window_records <= 0:
            return
        now = self._clock()
        rid = sample.stats.request_id
        old = self._held.pop(rid, None)  # a reused request id: the latest request counts
        if old is not None:
            self._held_bytes -= old.size
        held = _Held(sample, now + s.feedback_window_s, _held_size(sample))
        self._held[rid] = held
        self._held_bytes += held.size
        self._expire(now)

    def _remember_kept(self, request_id: str) -> None:
        s = self.settings
        if s.feedback_window_s <= 0 or s.feedback_window_records <= 0:
            return
        kept = self._kept_recently
        kept.pop(request_id, None)
        kept[request_id] = self._clock() + s.feedback_window_s
        if len(kept) > s.feedback_window_records:
            kept.popitem(last=False)

    def _expire(self, now: float) -> None:
        """Forget held requests past their window, and the oldest beyond the bounds (counted)."""
        s, held = self.settings, self._held
        while held:
            first = next(iter(held.values()))
            bytes_over = self._held_bytes > s.feedback_window_bytes
            over = len(held) > s.feedback_window_records or bytes_over
            if first.expires > now and not over:
                break
            held.popitem(last=False)
            self._held_bytes -= first.size
            if first.expires > now:
                self.metrics.held_evicted.inc()
        kept = self._kept_recently
        while kept and next(iter(kept.values())) <= now:
            kept.popitem(last=False)

    @property
    def held(self) -> int:
        """Skipped requests held for feedback now."""
        return len(self._held)

    def feedback(self, feedback: Feedback) -> bool:
        """Store one feedback: its held request as a sample carrying it, else a record of its own;
        True when written."""
        self._expire(self._clock())
        counts: Counter[str] = Counter()
        held = self._held.pop(feedback.request_id, None)
        try:
            comment = redact_all([feedback.comment], counts)[0] if feedback.comment else ""
            if held is not None:
                self._held_bytes -= held.size
                outcome = "promoted"
                sample = redact_sample(held.sample, counts)
                data, records = encode_records(
                    sample, list(sample.prompts), list(sample.outputs), ("feedback",),
                    self.sampler.rules.head_rate, counts, sample_id=new_sample_id(),
                    feedback=feedback_json(feedback, comment, outcome),
                )  # fmt: skip
                self._remember_kept(feedback.request_id)
            else:
                outcome = "attached" if feedback.request_id in self._kept_recently else "late"
                data = encode_feedback_record(
                    feedback, comment, outcome, counts, sample_id=new_sample_id()
                )
                records = 1
        except Exception:  # noqa: BLE001 - one bad feedback must not stop the writer
            self.dropped["write_error"].inc()
            log.exception("feedback not written", request_id=feedback.request_id)
            return False
        if not self._append([_Lines(data, records, "feedback", counts)]):
            return False
        self._feedback[outcome].inc()
        if outcome == "promoted":
            self._kept["feedback"].inc()
        for kind, n in counts.items():
            self._redacted[kind].inc(n)
        self.metrics.written.inc(records)
        self.metrics.written_bytes.inc(len(data))
        return True

    def housekeeping(self) -> None:
        """Rotate and fsync by time, and refresh the spool gauges (call a few times a second)."""
        try:
            self.spool.tick()
        except OSError:
            log.exception("spool housekeeping failed")
        self._expire(self._clock())
        self.metrics.held.set(len(self._held))
        self.metrics.held_bytes.set(self._held_bytes)
        self.metrics.fsyncs.inc(self.spool.stats.fsyncs - self._fsyncs_seen)
        self._fsyncs_seen = self.spool.stats.fsyncs
        self.metrics.size.set(self.spool.size)
        self.metrics.segments.set(self.spool.segments())

    def close(self) -> None:
        """Flush and close the current segment."""
        self.spool.close()
        self.housekeeping()
