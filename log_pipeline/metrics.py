"""Every log-pipeline metric, declared once with explicit buckets.

Three components share this module: the sampler and the spool run inside the gateway (their series
appear on the gateway's `/metrics`), the shipper serves its own `/metrics`. Labels take values from
closed sets only (`reason`, `output`, `kind`), never from a request.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from log_pipeline.redaction.text import KINDS
from log_pipeline.sampler import REASONS

# why a sample was kept (a record may have several; the first that applies is counted): the
# sampler's reasons, and feedback that arrived for a request it had not kept
KEEP_REASONS = (*REASONS, "feedback")
# what became of feedback in the writer: its request held unsampled and now kept (promoted), its
# sample already kept (attached), or its request no longer held (late: stored on its own)
FEEDBACK_OUTCOMES = ("promoted", "attached", "late")
# why a sample was not written
SAMPLER_DROP_REASONS = ("not_sampled", "key_cap")
SPOOL_DROP_REASONS = ("queue_full", "disk_cap", "write_error")
# why a delivery attempt failed (shipper)
# config_error: 401/403/404 (a missing privilege or data stream): retried, the output stalls;
# too_large: a record over Elasticsearch's http.max_content_length on its own (dead-lettered)
FAIL_REASONS = (
    "rejected_429", "server_error", "connection", "bad_response", "request_error", "config_error",
    "too_large", "permanent",
)  # fmt: skip
OUTPUTS = ("elasticsearch", "sqlite")
# what redaction finds in sample texts
REDACTION_KINDS = KINDS  # every kind the redactor labels

STAGE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
DELAY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)
BATCH_BUCKETS = (1, 10, 50, 100, 250, 500, 1000, 2000, 5000)

SAMPLER = "tokenpulse_sampler_"
SPOOL = "tokenpulse_spool_"
SHIPPER = "tokenpulse_shipper_"


class SinkMetrics:
    """Sampler, redaction and spool metrics (the sink's writer process; shown by the gateway)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.kept = Counter(
            f"{SAMPLER}samples_kept", "Samples kept, by the first reason that kept them.",
            ("reason",), registry=r,
        )  # fmt: skip
        self.skipped = Counter(
            f"{SAMPLER}samples_skipped", "Samples not kept (not sampled, or over a key's cap).",
            ("reason",), registry=r,
        )  # fmt: skip
        self.redactions = Counter(
            f"{SAMPLER}redactions", "Values redacted from sample texts, by kind.", ("kind",),
            registry=r,
        )  # fmt: skip
        self.feedback = Counter(
            f"{SAMPLER}feedback", "Feedback records written, by what became of the response: "
            "promoted (held unsampled, now kept), attached (already kept), late (no longer "
            "held: stored on its own under the response id).", ("outcome",), registry=r,
        )  # fmt: skip
        self.held = Gauge(
            f"{SAMPLER}held_requests", "Unsampled requests held for feedback.", registry=r
        )
        self.held_bytes = Gauge(
            f"{SAMPLER}held_bytes", "Approximate text bytes of the requests held for feedback.",
            registry=r,
        )  # fmt: skip
        self.held_evicted = Counter(
            f"{SAMPLER}held_evicted", "Held requests forgotten before their window ended, to "
            "stay within the record or byte bound.", registry=r,
        )  # fmt: skip
        self.written = Counter(f"{SPOOL}records_written", "Records appended.", registry=r)
        self.written_bytes = Counter(f"{SPOOL}written_bytes", "Bytes appended.", registry=r)
        self.dropped = Counter(
            f"{SPOOL}records_dropped", "Records dropped before the spool (never silently).",
            ("reason",), registry=r,
        )  # fmt: skip
        self.queue_depth = Gauge(
            f"{SPOOL}queue_records", "Samples not yet handed to the writer process.", registry=r
        )
        self.size = Gauge(f"{SPOOL}size_bytes", "Bytes held by spool segments.", registry=r)
        self.cap = Gauge(f"{SPOOL}capacity_bytes", "Disk cap of the spool.", registry=r)
        self.segments = Gauge(f"{SPOOL}segments", "Spool segment files on disk.", registry=r)
        self.fsyncs = Counter(f"{SPOOL}fsyncs", "fsync calls on spool segments.", registry=r)
        self.writer_restarts = Counter(
            f"{SPOOL}writer_restarts", "Times the sample writer process died and was restarted.",
            registry=r,
        )  # fmt: skip
        self.write_duration = Histogram(
            f"{SPOOL}write_duration_seconds", "Time to sample, redact and append one record.",
            buckets=STAGE_BUCKETS, registry=r,
        )  # fmt: skip
        for reason in KEEP_REASONS:
            self.kept.labels(reason)
        for reason in SAMPLER_DROP_REASONS:
            self.skipped.labels(reason)
        for outcome in FEEDBACK_OUTCOMES:
            self.feedback.labels(outcome)
        for reason in SPOOL_DROP_REASONS:
            self.dropped.labels(reason)
        for kind in REDACTION_KINDS:
            self.redactions.labels(kind)


class ShipperMetrics:
    """Shipper metrics; every per-output series exists from start-up for each configured output."""

    def __init__(self, registry: CollectorRegistry, outputs: tuple[str, ...]) -> None:
        r = registry
        self.shipped = Counter(
            f"{SHIPPER}records_shipped", "Records acknowledged by an output (409 included).",
            ("output",), registry=r,
        )  # fmt: skip
        self.duplicates = Counter(
            f"{SHIPPER}records_duplicate", "Records an output already held (409 / ignored insert).",
            ("output",), registry=r,
        )  # fmt: skip
        self.retried = Counter(
            f"{SHIPPER}records_retried", "Records sent again after a retryable failure.",
            ("output",), registry=r,
        )  # fmt: skip
        self.failed = Counter(
            f"{SHIPPER}send_failures", "Failed deliveries (records or whole requests), by reason.",
            ("output", "reason"), registry=r,
        )  # fmt: skip
        self.dead_lettered = Counter(
            f"{SHIPPER}records_dead_lettered", "Records rejected for good, written to the DLQ.",
            ("output",), registry=r,
        )  # fmt: skip
        self.backlog = Gauge(
            f"{SHIPPER}backlog_bytes", "Spool bytes not yet acknowledged by the output (summed "
            "over the writer directories of a spool root).", ("output",), registry=r,
        )  # fmt: skip
        self.oldest_age = Gauge(
            f"{SHIPPER}oldest_unshipped_age_seconds",
            "Age of the oldest record not yet acknowledged, in any writer directory (0 when "
            "caught up).", ("output",), registry=r,
        )  # fmt: skip
        # A spool root holds one directory per gateway pod: pod names are unbounded, so the
        # per-directory figures are aggregated (above) and counted here, never used as labels.
        self.directories = Gauge(
            f"{SHIPPER}spool_directories", "Writer directories followed (1 with --spool-dir).",
            registry=r,
        )  # fmt: skip
        self.directories_behind = Gauge(
            f"{SHIPPER}spool_directories_behind",
            "Writer directories holding records the output has not acknowledged.", ("output",),
            registry=r,
        )  # fmt: skip
        self.directories_removed = Counter(
            f"{SHIPPER}spool_directories_removed", "Writer directories removed: no writer, "
            "everything shipped by every known output, for the grace period.", registry=r,
        )  # fmt: skip
        self.up = Gauge(
            f"{SHIPPER}output_up", "1 when the output's last request succeeded.", ("output",),
            registry=r,
        )  # fmt: skip
        self.stalled = Gauge(
            f"{SHIPPER}output_stalled",
            "1 while the output waits on a configuration error (401/403/404: a missing privilege "
            "or data stream); nothing is dead-lettered meanwhile, records wait in the spool.",
            ("output",), registry=r,
        )  # fmt: skip
        self.delay = Histogram(
            f"{SHIPPER}delivery_delay_seconds", "From response to acknowledgement.",
            ("output",), buckets=DELAY_BUCKETS, registry=r,
        )  # fmt: skip
        self.batch_size = Histogram(
            f"{SHIPPER}batch_records", "Records per delivery request.", ("output",),
            buckets=BATCH_BUCKETS, registry=r,
        )  # fmt: skip
        self.malformed = Counter(
            f"{SHIPPER}malformed_lines", "Spool lines that could not be parsed (torn or garbage).",
            registry=r,
        )  # fmt: skip
        self.checkpoint_errors = Counter(
            f"{SHIPPER}checkpoint_errors", "Unreadable checkpoints (the output restarts at the "
            "oldest segment; resends are harmless).", ("output",), registry=r,
        )  # fmt: skip
        self.segments_skipped = Counter(
            f"{SHIPPER}segments_skipped", "Spool segments gone before the output read them "
            "(deleted by hand, or by a shipper that did not know the output): records lost to it.",
            ("output",), registry=r,
        )  # fmt: skip
        self.segments_deleted = Counter(
            f"{SHIPPER}segments_deleted", "Spool segments deleted after every output acked them.",
            registry=r,
        )  # fmt: skip
        for out in outputs:
            for metric in (
                self.shipped,
                self.duplicates,
                self.retried,
                self.dead_lettered,
                self.delay,
                self.batch_size,
            ):
                metric.labels(out)
            for reason in FAIL_REASONS:
                self.failed.labels(out, reason)
            self.backlog.labels(out)
            self.oldest_age.labels(out)
            self.directories_behind.labels(out)
            self.up.labels(out)
            self.stalled.labels(out)
            self.segments_skipped.labels(out)
            self.checkpoint_errors.labels(out)
