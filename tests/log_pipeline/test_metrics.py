"""The pipeline's metric names are a contract: alerts and dashboards use them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from log_pipeline.metrics import ShipperMetrics, SinkMetrics

SINK_NAMES = {
    "tokenpulse_sampler_samples_kept_total",
    "tokenpulse_sampler_samples_skipped_total",
    "tokenpulse_sampler_redactions_total",
    "tokenpulse_spool_records_written_total",
    "tokenpulse_spool_written_bytes_total",
    "tokenpulse_spool_records_dropped_total",
    "tokenpulse_spool_queue_records",
    "tokenpulse_spool_size_bytes",
    "tokenpulse_spool_capacity_bytes",
    "tokenpulse_spool_segments",
    "tokenpulse_spool_fsyncs_total",
    "tokenpulse_spool_write_duration_seconds_bucket",
}
SHIPPER_NAMES = {
    "tokenpulse_shipper_records_shipped_total",
    "tokenpulse_shipper_records_duplicate_total",
    "tokenpulse_shipper_records_retried_total",
    "tokenpulse_shipper_send_failures_total",
    "tokenpulse_shipper_records_dead_lettered_total",
    "tokenpulse_shipper_backlog_bytes",
    "tokenpulse_shipper_oldest_unshipped_age_seconds",
    "tokenpulse_shipper_output_up",
    "tokenpulse_shipper_delivery_delay_seconds_bucket",
    "tokenpulse_shipper_batch_records_bucket",
    "tokenpulse_shipper_malformed_lines_total",
    "tokenpulse_shipper_checkpoint_errors_total",
    "tokenpulse_shipper_segments_deleted_total",
}


def _names(registry: CollectorRegistry) -> set[str]:
    return {s.name for m in registry.collect() for s in m.samples}


def test_sink_metric_names() -> None:
    registry = CollectorRegistry()
    SinkMetrics(registry)
    assert SINK_NAMES <= _names(registry)
    assert (
        registry.get_sample_value("tokenpulse_spool_records_dropped_total", {"reason": "disk_cap"})
        == 0.0
    )


def test_shipper_series_exist_per_output_from_start() -> None:
    registry = CollectorRegistry()
    ShipperMetrics(registry, ("elasticsearch", "sqlite"))
    assert SHIPPER_NAMES <= _names(registry)
    for out in ("elasticsearch", "sqlite"):
        assert registry.get_sample_value("tokenpulse_shipper_output_up", {"output": out}) == 0.0
        assert (
            registry.get_sample_value(
                "tokenpulse_shipper_send_failures_total", {"output": out, "reason": "permanent"}
            )
            == 0.0
        )
