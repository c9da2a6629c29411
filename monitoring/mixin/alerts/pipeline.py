"""The log pipeline's alerts: the shipper (its group) and the gateway's sample spool (its own)."""

from __future__ import annotations

from monitoring.mixin.alerts.common import down
from monitoring.mixin.config import MixinConfig
from monitoring.mixin.model import Alert
from monitoring.mixin.promql import Timing, number


def shipper_alerts(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """The shipper down; its backlog age, dead letters, stalled outputs, skipped segments."""
    w = t(cfg.pipeline_loss_window)
    shipper = cfg.sel("shipper")
    return [
        down(cfg, "shipper", "Shipper", "warning", "The sample shipper"),
        Alert(
            "ShipperBacklogOld",
            # an age is a duration: compressed like the windows (600 s -> 10 s), or a drill
            # would wait 10 real minutes of store outage for a rule whose `for` is 10 s
            f"tokenpulse_shipper_oldest_unshipped_age_seconds{cfg.sel('shipper')}"
            f" > {t.secs(f'{cfg.spool_backlog_age_s}s')}",
            cfg.spool_backlog_for,
            "warning",
            "Sampled generations wait long in the spool before reaching the store.",
            "The oldest record not yet acknowledged by output {{ $labels.output }} is "
            "{{ $value | humanizeDuration }} old.",
        ),
        Alert(
            "ShipperDeadLetters",
            f"increase(tokenpulse_shipper_records_dead_lettered_total{shipper}[{w}]) > 0",
            cfg.pipeline_loss_for,
            "warning",
            "The store rejected sampled generations for good.",
            "{{ $value | humanize }} records were dead-lettered by output {{ $labels.output }} "
            f"in {cfg.pipeline_loss_window}.",
        ),
        Alert(
            "ShipperStalled",
            f"max by (output) (tokenpulse_shipper_output_stalled{cfg.sel('shipper')}) == 1",
            cfg.shipper_stalled_for,
            # chat, not a page: samples are not users' requests, the spool holds them, and
            # losing them (PipelineSamplesDropped) is a warning too
            "warning",
            "A shipper output is stalled on a configuration error.",
            "Output {{ $labels.output }} waits on a store that refuses it (401/403/404, a missing "
            "privilege or data stream); its records wait in the spool.",
        ),
        Alert(
            "ShipperSegmentsSkipped",
            f"increase(tokenpulse_shipper_segments_skipped_total{cfg.sel('shipper')}[{w}]) > 0",
            cfg.pipeline_loss_for,
            "warning",
            "Spool segments were gone before a shipper output read them.",
            "{{ $value | humanize }} spool segments were gone before output {{ $labels.output }} "
            f"read them in {cfg.pipeline_loss_window}; their records never reach it.",
        ),
    ]


def spool_alerts(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """The gateway's sample spool: samples dropped, the spool near its cap."""
    w = t(cfg.pipeline_loss_window)
    gw = cfg.sel("gateway")
    return [
        Alert(
            "PipelineSamplesDropped",
            # a sustained rate: a burst that fills the sink queue for a moment drops by design
            f"sum by (job, instance) (rate(tokenpulse_spool_records_dropped_total{gw}[{w}])"
            f" or rate(tokenpulse_gateway_samples_dropped_total{gw}[{w}]))"
            f" > {number(cfg.samples_dropped_rate)}",
            cfg.samples_dropped_for,
            "warning",
            "The gateway keeps dropping sampled generations before they reach the spool.",
            'The gateway at {{ $labels.instance }} drops {{ $value | printf "%.2g" }} samples/s '
            f"over {cfg.pipeline_loss_window} (sink queue full, spool at its cap or write errors).",
        ),
        Alert(
            "PipelineSpoolNearlyFull",
            f"max by (job, instance) (tokenpulse_spool_size_bytes{gw}"
            f" / tokenpulse_spool_capacity_bytes{gw}) > {number(cfg.spool_full_share)}",
            cfg.spool_full_for,
            "warning",
            "The sample spool's disk use nears its cap: new samples will be dropped.",
            "The spool of the gateway at {{ $labels.instance }} holds "
            "{{ $value | humanizePercentage }} of its cap (cap_bytes); past it new samples are "
            "dropped.",
        ),
    ]
