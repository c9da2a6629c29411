"""The metric catalogue gathers what every component declares, with the series' real suffixes."""

from __future__ import annotations

from stack import catalogue


def test_declared_metrics_come_from_every_component() -> None:
    known = catalogue.declared_metrics()
    for name in (
        "tokenpulse_gateway_requests_total",  # gateway
        "tokenpulse_gateway_request_duration_seconds_bucket",
        ":tensorflow:serving:request_count",  # model server (TF Serving: no _total)
        ":tensorflow:serving:batching_session:padding_size_sum",
        "tokenpulse_gpu_utilization_ratio",  # exporter
        "tokenpulse_canary_runs_total",
        "tokenpulse_shipper_records_shipped_total",  # log pipeline
        "tokenpulse_spool_records_written_total",
        "tokenpulse_training_step_duration_seconds_bucket",  # training workers
        "tokenpulse_training_worker_info",
        "up",  # Prometheus
        "ALERTS",
    ):
        assert name in known, name
    assert "tokenpulse_gateway_requests" not in known  # counters only with _total


def test_each_component_contributes_only_its_own_names() -> None:
    assert all(n.startswith("tokenpulse_gateway_") for n in catalogue.gateway())
    assert all(n.startswith(":tensorflow:") for n in catalogue.modelserver())
    assert all(n.startswith("tokenpulse_") for n in catalogue.exporter())
    prefixes = ("tokenpulse_sampler_", "tokenpulse_spool_", "tokenpulse_shipper_",
                "tokenpulse_redaction_")  # fmt: skip
    assert all(n.startswith(prefixes) for n in catalogue.log_pipeline()), catalogue.log_pipeline()
    assert all(n.startswith("tokenpulse_training_") for n in catalogue.training())


def test_series_names_follow_the_family_type() -> None:
    assert catalogue.series_names("a", "counter") == {"a_total"}
    assert catalogue.series_names("a", "histogram") == {"a_bucket", "a_sum", "a_count"}
    assert catalogue.series_names("a", "gauge") == {"a"}
