"""Pipeline and exporter health: samples through sampler, spool and shipper; collectors; targets."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard

from monitoring.mixin.config import MixinConfig
from monitoring.mixin.dashboards.panels import (
    RATE,
    Q,
    bad_above,
    new_dashboard,
    ok_above,
    ts_panel,
)

# component part of each `...Down` alert name, one per scraped job above
DOWN_ALERTS = ("TfServing", "Gateway", "Exporter", "Shipper", "Alertmanager", "Prometheus")


def _jobs(cfg: MixinConfig) -> str:
    # the monitoring's own jobs too: the meta-alerts (and the Watchdog) link this panel
    return "|".join(
        getattr(cfg.jobs, c)
        for c in ("modelserver", "gateway", "exporter", "shipper", "alertmanager", "prometheus")
    )


def _flow_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    gw_job = cfg.jobs.selector("gateway")
    sh = cfg.jobs.selector("shipper")
    return (
        d.with_row(dashboard.Row("Samples"))
        .with_panel(
            ts_panel(cfg,
                "Samples through the pipeline",
                "Samples per second: kept by the sampler, written to the spool, shipped "
                "(acknowledged) by each output.",
                "ops",
                [
                    Q(f"sum(rate(tokenpulse_sampler_samples_kept_total{{{gw_job}}}[{RATE}]))",
                      "sampled"),
                    Q(f"sum(rate(tokenpulse_spool_records_written_total{{{gw_job}}}[{RATE}]))",
                      "spooled"),
                    Q(f"sum by (output) (rate(tokenpulse_shipper_records_shipped_total{{{sh}}}"
                      f"[{RATE}]))", "shipped {{output}}"),
                ],
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Dropped and dead-lettered",
                "Samples lost per second: dropped before the spool (by reason), dropped by a "
                "full gateway sink queue, rejected for good by an output (dead letters).",
                "ops",
                [
                    Q(f"sum by (reason) (rate(tokenpulse_spool_records_dropped_total{{{gw_job}}}"
                      f"[{RATE}]))", "dropped {{reason}}"),
                    Q(f"sum(rate(tokenpulse_gateway_samples_dropped_total{{{gw_job}}}[{RATE}]))",
                      "sink queue full"),
                    Q(f"sum by (output) (rate(tokenpulse_shipper_records_dead_lettered_total"
                      f"{{{sh}}}[{RATE}]))", "dead-lettered {{output}}"),
                ],
                bad_above(0.01),
                runbooks=("TokenPulsePipelineSamplesDropped", "TokenPulseShipperDeadLetters"),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Backlog age",
                "Age of the oldest sample not yet acknowledged by each output; the dashed "
                "line is the backlog alert threshold.",
                "s",
                [Q(f"max by (output) (tokenpulse_shipper_oldest_unshipped_age_seconds{{{sh}}})",
                   "{{output}}")],
                bad_above(float(cfg.spool_backlog_age_s)),
                runbooks=("TokenPulseShipperBacklogOld",),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Store errors",
                "Failed deliveries per second by output and reason (429s, 5xx, connection "
                "errors, bad responses, permanent rejections).",
                "ops",
                [Q(f"sum by (output, reason) (rate(tokenpulse_shipper_send_failures_total{{{sh}}}"
                   f"[{RATE}]))", "{{output}} {{reason}}")],
                bad_above(0.1),
                runbooks=("TokenPulseShipperDown",),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Stalled outputs and config errors",
                "Outputs stalled on a configuration error (1: a 401/403/404 from the store, "
                "records wait in the spool), config errors and records too large for the store "
                "per second, and spool segments gone before an output read them.",
                "short",
                [
                    Q(f"max by (output) (tokenpulse_shipper_output_stalled{{{sh}}})",
                      "stalled {{output}}"),
                    Q(f"sum by (output) (rate(tokenpulse_shipper_send_failures_total{{{sh}, "
                      f'reason="config_error"}}[{RATE}]))', "config errors/s {{output}}"),
                    Q(f"sum by (output) (rate(tokenpulse_shipper_send_failures_total{{{sh}, "
                      f'reason="too_large"}}[{RATE}]))', "too large/s {{output}}"),
                    Q(f"sum by (output) (increase(tokenpulse_shipper_segments_skipped_total"
                      f"{{{sh}}}[{RATE}]))", "segments skipped {{output}}"),
                ],
                bad_above(0.5),
                runbooks=("TokenPulseShipperStalled", "TokenPulseShipperSegmentsSkipped"),
            )
        )
    )  # fmt: skip


def _health_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    ex = cfg.jobs.selector("exporter")
    return (
        d.with_row(dashboard.Row("Exporter and targets"))
        .with_panel(
            ts_panel(cfg,
                "Collector success",
                "Whether each exporter collector's last scrape succeeded (1) or failed (0): a "
                "broken collector shows here, not as a failed scrape.",
                "none",
                [Q(f"min by (collector) (tokenpulse_exporter_collector_success{{{ex}}})",
                   "{{collector}}")],
                ok_above(1),
                max_value=1,
                width=8,
                runbooks=("TokenPulseExporterCollectorFailing",),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Collector duration",
                "How long each exporter collector took in the last scrape.",
                "s",
                [Q(f"max by (collector) (tokenpulse_exporter_collector_duration_seconds{{{ex}}})",
                   "{{collector}}")],
                bad_above(1.0),
                width=8,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Scrape targets up",
                "Prometheus' own view of each component: 1 when its last scrape succeeded.",
                "none",
                [Q(f'min by (job) (up{{job=~"{_jobs(cfg)}"}})', "{{job}}")],
                ok_above(1),
                max_value=1,
                width=8,
                runbooks=tuple(f"TokenPulse{c}Down" for c in DOWN_ALERTS),
            )
        )
    )  # fmt: skip


def build(cfg: MixinConfig) -> dashboard.Dashboard:
    """The pipeline and exporter health dashboard."""
    d = new_dashboard(
        cfg.dashboard_uids["pipeline"],
        "TokenPulse / Pipeline and exporter health",
        "The sample log pipeline (sampler and spool in the gateway, the shipper) and the "
        "exporter's collectors, plus every scrape target.",
        ["tokenpulse", "pipeline", "exporter"],
    )
    return _health_row(cfg, _flow_row(cfg, d))
