"""Pipeline and exporter health: samples through sampler, spool and shipper; collectors; targets."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard

from monitoring.mixin import config as cfg
from monitoring.mixin.dashboards.panels import (
    RATE,
    Q,
    bad_above,
    new_dashboard,
    ok_above,
    ts_panel,
)

GW_JOB = cfg.JOBS.selector("gateway")
SH = cfg.JOBS.selector("shipper")
EX = cfg.JOBS.selector("exporter")
# component part of each `...Down` alert name, one per scraped job above
DOWN_ALERTS = ("TfServing", "Gateway", "Exporter", "Shipper", "Alertmanager", "Prometheus")
# the monitoring's own jobs too: the meta-alerts (and the Watchdog) link this panel
JOBS = "|".join(
    getattr(cfg.JOBS, c)
    for c in ("modelserver", "gateway", "exporter", "shipper", "alertmanager", "prometheus")
)


def _flow_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        d.with_row(dashboard.Row("Samples"))
        .with_panel(
            ts_panel(
                "Samples through the pipeline",
                "Samples per second: kept by the sampler, written to the spool, shipped "
                "(acknowledged) by each output.",
                "ops",
                [
                    Q(f"sum(rate(tokenpulse_sampler_samples_kept_total{{{GW_JOB}}}[{RATE}]))",
                      "sampled"),
                    Q(f"sum(rate(tokenpulse_spool_records_written_total{{{GW_JOB}}}[{RATE}]))",
                      "spooled"),
                    Q(f"sum by (output) (rate(tokenpulse_shipper_records_shipped_total{{{SH}}}"
                      f"[{RATE}]))", "shipped {{output}}"),
                ],
            )
        )
        .with_panel(
            ts_panel(
                "Dropped and dead-lettered",
                "Samples lost per second: dropped before the spool (by reason), dropped by a "
                "full gateway sink queue, rejected for good by an output (dead letters).",
                "ops",
                [
                    Q(f"sum by (reason) (rate(tokenpulse_spool_records_dropped_total{{{GW_JOB}}}"
                      f"[{RATE}]))", "dropped {{reason}}"),
                    Q(f"sum(rate(tokenpulse_gateway_samples_dropped_total{{{GW_JOB}}}[{RATE}]))",
                      "sink queue full"),
                    Q(f"sum by (output) (rate(tokenpulse_shipper_records_dead_lettered_total"
                      f"{{{SH}}}[{RATE}]))", "dead-lettered {{output}}"),
                ],
                bad_above(0.01),
                runbooks=("TokenPulsePipelineSamplesDropped", "TokenPulseShipperDeadLetters"),
            )
        )
        .with_panel(
            ts_panel(
                "Backlog age",
                "Age of the oldest sample not yet acknowledged by each output; the dashed "
                "line is the backlog alert threshold.",
                "s",
                [Q(f"max by (output) (tokenpulse_shipper_oldest_unshipped_age_seconds{{{SH}}})",
                   "{{output}}")],
                bad_above(float(cfg.SPOOL_BACKLOG_AGE_S)),
                runbooks=("TokenPulseShipperBacklogOld",),
            )
        )
        .with_panel(
            ts_panel(
                "Store errors",
                "Failed deliveries per second by output and reason (429s, 5xx, connection "
                "errors, bad responses, permanent rejections).",
                "ops",
                [Q(f"sum by (output, reason) (rate(tokenpulse_shipper_send_failures_total{{{SH}}}"
                   f"[{RATE}]))", "{{output}} {{reason}}")],
                bad_above(0.1),
                runbooks=("TokenPulseShipperDown",),
            )
        )
        .with_panel(
            ts_panel(
                "Stalled outputs and config errors",
                "Outputs stalled on a configuration error (1: a 401/403/404 from the store, "
                "records wait in the spool), config errors and records too large for the store "
                "per second, and spool segments gone before an output read them.",
                "short",
                [
                    Q(f"max by (output) (tokenpulse_shipper_output_stalled{{{SH}}})",
                      "stalled {{output}}"),
                    Q(f"sum by (output) (rate(tokenpulse_shipper_send_failures_total{{{SH}, "
                      f'reason="config_error"}}[{RATE}]))', "config errors/s {{output}}"),
                    Q(f"sum by (output) (rate(tokenpulse_shipper_send_failures_total{{{SH}, "
                      f'reason="too_large"}}[{RATE}]))', "too large/s {{output}}"),
                    Q(f"sum by (output) (increase(tokenpulse_shipper_segments_skipped_total"
                      f"{{{SH}}}[{RATE}]))", "segments skipped {{output}}"),
                ],
                bad_above(0.5),
                runbooks=("TokenPulseShipperStalled", "TokenPulseShipperSegmentsSkipped"),
            )
        )
    )  # fmt: skip


def _health_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        d.with_row(dashboard.Row("Exporter and targets"))
        .with_panel(
            ts_panel(
                "Collector success",
                "Whether each exporter collector's last scrape succeeded (1) or failed (0): a "
                "broken collector shows here, not as a failed scrape.",
                "none",
                [Q(f"min by (collector) (tokenpulse_exporter_collector_success{{{EX}}})",
                   "{{collector}}")],
                ok_above(1),
                max_value=1,
                width=8,
                runbooks=("TokenPulseExporterCollectorFailing",),
            )
        )
        .with_panel(
            ts_panel(
                "Collector duration",
                "How long each exporter collector took in the last scrape.",
                "s",
                [Q(f"max by (collector) (tokenpulse_exporter_collector_duration_seconds{{{EX}}})",
                   "{{collector}}")],
                bad_above(1.0),
                width=8,
            )
        )
        .with_panel(
            ts_panel(
                "Scrape targets up",
                "Prometheus' own view of each component: 1 when its last scrape succeeded.",
                "none",
                [Q(f'min by (job) (up{{job=~"{JOBS}"}})', "{{job}}")],
                ok_above(1),
                max_value=1,
                width=8,
                runbooks=tuple(f"TokenPulse{c}Down" for c in DOWN_ALERTS),
            )
        )
    )  # fmt: skip


def build() -> dashboard.Dashboard:
    """The pipeline and exporter health dashboard."""
    d = new_dashboard(
        cfg.DASHBOARD_UIDS["pipeline"],
        "TokenPulse / Pipeline and exporter health",
        "The sample log pipeline (sampler and spool in the gateway, the shipper) and the "
        "exporter's collectors, plus every scrape target.",
        ["tokenpulse", "pipeline", "exporter"],
    )
    return _health_row(_flow_row(d))
