"""Health alerts: components down, model versions, circuit breaker, GPUs, log pipeline, exporter."""

from __future__ import annotations

from monitoring.mixin import config as c
from monitoring.mixin.model import Alert
from monitoring.mixin.promql import Timing, number, sel

# names the replica where the series has the label (nothing where it has not: one replica)
REPLICA = (
    f"{{{{ with $labels.{c.REPLICA_LABEL} }}}} Replica {{{{ . }}}} is out of the gateway's "
    "rotation; the other replicas serve.{{ end }}"
)


def _down(component: str, name: str, severity: str, what: str, replica: str = "") -> Alert:
    return Alert(
        f"{name}Down",
        f"up{sel(component)} == 0",
        c.DOWN_FOR,
        severity,
        f"{what} cannot be scraped.",
        f"Prometheus cannot scrape {what[0].lower()}{what[1:]} at {{{{ $labels.instance }}}} "
        f"(job {{{{ $labels.job }}}}).{replica}",
        per_replica=bool(replica),
    )


def component_alerts(t: Timing) -> list[Alert]:
    """Scrape targets down; model versions; the gateway's breaker."""
    tfs_down = f"up{sel('modelserver')} == 0"
    ex = sel("exporter")
    # every replica at once: subquery over the fleet's best target, not each target's worst
    fleet_up = f"max by (job) (up{sel('modelserver')})"
    return [
        _down("modelserver", "TfServing", "critical", "The model server (TF Serving)", REPLICA),
        _down("gateway", "Gateway", "critical", "The gateway"),
        _down("exporter", "Exporter", "warning", "The exporter"),
        _down("shipper", "Shipper", "warning", "The sample shipper"),
        Alert(
            "TfServingRecentlyDown",
            f"min_over_time(up{sel('modelserver')}[{t(c.RECOVERY_WINDOW)}]) == 0",
            c.DOWN_FOR,
            "info",
            "TF Serving was down within the recovery window; its symptoms stay silenced.",
            "TF Serving at {{ $labels.instance }} was unreachable in the last "
            f"{c.RECOVERY_WINDOW}: alerts it explains are inhibited until its effects age out "
            "of their windows.",
            per_replica=True,
        ),
        Alert(
            "TfServingFleetRecentlyDown",
            f"min_over_time({fleet_up}[{t(c.RECOVERY_WINDOW)}:]) == 0",
            c.DOWN_FOR,
            "info",
            "Every TF Serving replica was down at once within the recovery window.",
            "No TF Serving replica of job {{ $labels.job }} could be scraped at some point in "
            f"the last {c.RECOVERY_WINDOW}: the fleet-wide symptoms it explains (SLO burn, "
            "breaker, quality) are inhibited until its effects age out of their windows.",
        ),
        Alert(
            "TfServingNoAvailableVersion",
            # a down server is its own page: do not page twice for it
            f"(tokenpulse_tfserving_model_versions_available{ex} == 0"
            f" or tokenpulse_tfserving_up{ex} == 0)\nunless on ({c.REPLICA_LABEL}) ({tfs_down})",
            c.NO_VERSION_FOR,
            "critical",
            "A model has no AVAILABLE version: every request for it fails.",
            "TF Serving reports no AVAILABLE version of model {{ $labels.model }}.",
            per_replica=True,
        ),
        Alert(
            "TfServingVersionLoadFailed",
            f"tokenpulse_tfserving_model_version_status_ok{ex} == 0",
            c.LOAD_FAILURE_FOR,
            "warning",
            "A model version failed to load.",
            "Model {{ $labels.model }} version {{ $labels.version }} has an error status in "
            "TF Serving: it did not load and serves nothing.",
            per_replica=True,
        ),
        Alert(
            "GatewayCircuitBreakerOpen",
            # the breaker half-opens every few seconds to probe: look at the window's worst
            "max_over_time(tokenpulse_gateway_circuit_breaker_state"
            f"{sel('gateway')}[{t(c.BREAKER_FOR)}]) == 2",
            c.BREAKER_FOR,
            "warning",
            "The gateway's circuit breaker to TF Serving is open.",
            "The gateway at {{ $labels.instance }} fails requests fast: its upstream breaker "
            "opened after repeated upstream failures.",
            symptom=True,
        ),
        Alert(
            "ExporterCollectorFailing",
            f"tokenpulse_exporter_collector_success{ex} == 0",
            c.COLLECTOR_FOR,
            "warning",
            "An exporter collector keeps failing.",
            "Collector {{ $labels.collector }} of the exporter at {{ $labels.instance }} has "
            "failed every scrape: its series are missing or stale.",
            per_replica=True,
        ),
    ]


def gpu_alerts(t: Timing) -> list[Alert]:
    """GPU memory, throttling, XIDs, ECC, lost GPUs (exporter's nvml collector)."""
    ex = sel("exporter")
    reasons = sel("exporter", f'reason=~"{c.GPU_THROTTLE_REASONS}"')
    xids = sel("exporter", f'xid=~"{c.GPU_CRITICAL_XIDS}"')
    ecc = sel("exporter", 'type="uncorrected"')
    return [
        Alert(
            "GpuMemoryNearlyFull",
            f"tokenpulse_gpu_memory_used_bytes{ex} / tokenpulse_gpu_memory_total_bytes{ex}"
            f" > {number(c.GPU_MEMORY_FULL)}",
            c.GPU_MEMORY_FOR,
            "warning",
            "A GPU's memory is nearly full.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) uses {{ $value | humanizePercentage }} "
            "of its memory.",
        ),
        Alert(
            "GpuThrottled",
            f"tokenpulse_gpu_throttle_reason_active{reasons} == 1",
            c.GPU_THROTTLE_FOR,
            "warning",
            "A GPU is throttled by heat or power.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) clocks are held down by "
            "{{ $labels.reason }}.",
        ),
        Alert(
            "GpuCriticalXid",
            # the timestamp, not increase(): increase() misses a counter's first event
            f"time() - tokenpulse_gpu_xid_last_timestamp_seconds{xids}"
            f" < {t.secs(c.GPU_XID_WINDOW)}",
            c.GPU_EVENT_FOR,
            "critical",
            "A GPU reported a critical XID error.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) reported XID {{ $labels.xid }} "
            "{{ $value | humanizeDuration }} ago.",
        ),
        Alert(
            "GpuEccErrors",
            f"increase(tokenpulse_gpu_ecc_errors_total{ecc}[{t(c.GPU_ECC_WINDOW)}]) > 0",
            c.GPU_EVENT_FOR,
            "warning",
            "A GPU reports uncorrected ECC errors.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) had {{ $value | humanize }} uncorrected "
            f"ECC errors in {c.GPU_ECC_WINDOW}.",
        ),
        Alert(
            "GpuLost",
            f"tokenpulse_gpu_lost{ex} == 1",
            c.GPU_LOST_FOR,
            "critical",
            "A GPU has fallen off the bus or cannot be reached.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) is lost to NVML on {{ $labels.instance }}.",
        ),
    ]


def pipeline_alerts(t: Timing) -> list[Alert]:
    """Spool backlog age, dead letters, stalled outputs, skipped segments, dropped samples."""
    w = t(c.PIPELINE_LOSS_WINDOW)
    gw = sel("gateway")
    return [
        Alert(
            "ShipperBacklogOld",
            f"tokenpulse_shipper_oldest_unshipped_age_seconds{sel('shipper')}"
            f" > {c.SPOOL_BACKLOG_AGE_S}",
            c.SPOOL_BACKLOG_FOR,
            "warning",
            "Sampled generations wait long in the spool before reaching the store.",
            "The oldest record not yet acknowledged by output {{ $labels.output }} is "
            "{{ $value | humanizeDuration }} old.",
        ),
        Alert(
            "ShipperDeadLetters",
            f"increase(tokenpulse_shipper_records_dead_lettered_total{sel('shipper')}[{w}]) > 0",
            c.PIPELINE_LOSS_FOR,
            "warning",
            "The store rejected sampled generations for good.",
            "{{ $value | humanize }} records were dead-lettered by output {{ $labels.output }} "
            f"in {c.PIPELINE_LOSS_WINDOW}.",
        ),
        Alert(
            "ShipperStalled",
            f"max by (output) (tokenpulse_shipper_output_stalled{sel('shipper')}) == 1",
            c.SHIPPER_STALLED_FOR,
            "critical",
            "A shipper output is stalled on a configuration error.",
            "Output {{ $labels.output }} waits on a store that refuses it (401/403/404, a missing "
            "privilege or data stream); its records wait in the spool.",
        ),
        Alert(
            "ShipperSegmentsSkipped",
            f"increase(tokenpulse_shipper_segments_skipped_total{sel('shipper')}[{w}]) > 0",
            c.PIPELINE_LOSS_FOR,
            "warning",
            "Spool segments were gone before a shipper output read them.",
            "{{ $value | humanize }} spool segments were gone before output {{ $labels.output }} "
            f"read them in {c.PIPELINE_LOSS_WINDOW}; their records never reach it.",
        ),
        Alert(
            "PipelineSamplesDropped",
            f"sum by (job, instance) (increase(tokenpulse_spool_records_dropped_total{gw}[{w}]))"
            f" > 0\nor sum by (job, instance)"
            f" (increase(tokenpulse_gateway_samples_dropped_total{gw}[{w}])) > 0",
            c.PIPELINE_LOSS_FOR,
            "warning",
            "The gateway dropped sampled generations before they reached the spool.",
            "The gateway at {{ $labels.instance }} dropped {{ $value | humanize }} samples in "
            f"{c.PIPELINE_LOSS_WINDOW} (sink queue full, spool at its cap or write errors).",
        ),
    ]


def health_alerts(t: Timing) -> list[Alert]:
    """Every health alert."""
    return component_alerts(t) + gpu_alerts(t) + pipeline_alerts(t)
