"""Health alerts: components down, model versions, circuit breaker, GPUs, log pipeline, exporter."""

from __future__ import annotations

from dataclasses import replace

from monitoring.mixin import config as c
from monitoring.mixin.holds import down_holds, unavailable_holds
from monitoring.mixin.model import GATEWAY_PREFIX, Alert
from monitoring.mixin.promql import Timing, number, sel

# the exporter's collectors that read the model server (they fail while it is down)
MODELSERVER_COLLECTORS = "tfserving|canary"

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


def in_flight_per_replica(window: str) -> str:
    """Mean predict calls in flight from the gateway per model-server replica that is up."""
    in_flight = f"{GATEWAY_PREFIX}upstream_in_flight_requests{sel('gateway')}"
    replicas = f"count(up{sel('modelserver')} == 1)"
    return f"sum(avg_over_time({in_flight}[{window}])) / {replicas}"


def _exhausted(t: Timing) -> str:
    """Requests/s TF Serving answered RESOURCE_EXHAUSTED, per target and model."""
    status = sel("modelserver", 'status="RESOURCE_EXHAUSTED"')
    w = t(c.RESOURCE_EXHAUSTED_WINDOW)
    return f"rate(:tensorflow:serving:request_count{status}[{w}])"


def flapping_alert(t: Timing) -> Alert:
    """A crash loop: down again within FLAP_WINDOW of an earlier outage; one page through it."""
    up = f"up{sel('modelserver')}"
    return Alert(
        "TfServingFlapping",
        # `up` went down, came back and went down again within the window (3 changes), and it
        # was down within FLAP_RECENT: true around every outage of the loop, and keep_firing_for
        # carries it over the up-times between them
        f"changes({up}[{t(c.FLAP_WINDOW)}]) >= {c.FLAP_CHANGES}\n"
        f"and min_over_time({up}[{t(c.FLAP_RECENT)}]) == 0",
        c.FLAP_FOR,
        "critical",
        "TF Serving keeps going down and coming back: a crash loop.",
        "TF Serving at {{ $labels.instance }} changed between up and down "
        f"{{{{ $value }}}} times in {c.FLAP_WINDOW}: every down spell fails requests, even those "
        "too short to page as TokenPulseTfServingDown (which the loop's page stands for).",
        per_replica=True,
        keep_firing_for=c.FLAP_KEEP_FIRING,
    )


def component_alerts(t: Timing) -> list[Alert]:
    """Scrape targets down, flapping; model versions (and the holds after their pages); the
    gateway's breaker."""
    tfs_down = f"up{sel('modelserver')} == 0"
    ex = sel("exporter")
    # node: kept where present (Kubernetes), so a GPU alert can explain it (GpuMemoryNearlyFull)
    replica_by = f"job, instance, {c.REPLICA_LABEL}, {c.NODE_LABEL}"
    exhausted = _exhausted(t)
    reads = sel("exporter", f'collector=~"{MODELSERVER_COLLECTORS}"')
    others = sel("exporter", f'collector!~"{MODELSERVER_COLLECTORS}"')
    flapping = f'ALERTS{{alertname="{c.ALERT_PREFIX}TfServingFlapping",alertstate="firing"}}'
    return [
        replace(
            _down("modelserver", "TfServing", "critical", "The model server (TF Serving)", REPLICA),
            # a crash loop is one page (TfServingFlapping, firing through the loop): its outages
            # are not paged one by one
            expr=f"{tfs_down}\nunless on ({replica_by}) {flapping}",
        ),
        _down("gateway", "Gateway", "critical", "The gateway"),
        _down("exporter", "Exporter", "warning", "The exporter"),
        _down("shipper", "Shipper", "warning", "The sample shipper"),
        *down_holds(t),
        flapping_alert(t),
        Alert(
            "TfServingResourceExhausted",
            f"sum by ({replica_by}, model_name) ({exhausted})"
            f" > {number(c.RESOURCE_EXHAUSTED_RATE)}",
            c.RESOURCE_EXHAUSTED_FOR,
            "warning",
            "TF Serving refuses requests with RESOURCE_EXHAUSTED.",
            'TF Serving at {{ $labels.instance }} answers {{ $value | printf "%.2g" }} '
            "requests/s for model {{ $labels.model_name }} with RESOURCE_EXHAUSTED (out of memory "
            f"or a full batch queue) over {c.RESOURCE_EXHAUSTED_WINDOW}.",
            per_replica=True,
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
        *unavailable_holds(t),
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
            windowed=True,  # the window's worst state holds the outage for BREAKER_FOR
        ),
        Alert(
            "ExporterCollectorFailing",
            # the collectors that read the model server fail while it is down, its own page: not
            # pending then, so a restart cannot race this alert's resolve against TfServingDown's
            f"tokenpulse_exporter_collector_success{others} == 0\n"
            f"or (tokenpulse_exporter_collector_success{reads} == 0\n"
            f"unless on ({c.REPLICA_LABEL}) ({tfs_down}))",
            c.COLLECTOR_FOR,
            "warning",
            "An exporter collector keeps failing.",
            "Collector {{ $labels.collector }} of the exporter at {{ $labels.instance }} has "
            "failed every scrape: its series are missing or stale.",
            per_replica=True,
        ),
    ]


def gpu_alerts(t: Timing) -> list[Alert]:
    """GPU memory pressure, throttling, heat, row remaps, idling, XIDs, ECC, lost GPUs (exporter's
    nvml collector). A GPU joins the model servers on the same machine by config.NODE_LABEL: on
    Kubernetes the node (the GPU exporter is a DaemonSet, no replica's witness); locally and on
    compose one machine, where the label is absent on both sides (absent equals absent)."""
    ex = sel("exporter")
    xids = sel("exporter", f'xid=~"{c.GPU_CRITICAL_XIDS}"')
    ecc = sel("exporter", 'type="uncorrected"')
    tw = t(c.GPU_THROTTLE_WINDOW)
    policy = sel("exporter", f'policy="{c.GPU_THROTTLE_POLICY}"')
    hw = sel("exporter", f'reason=~"{c.GPU_THROTTLE_HW_REASONS}"')
    gpu = "job, instance, gpu, uuid"
    r = f"{c.REPLICA_LABEL}, {c.NODE_LABEL}"  # kept where present
    node = c.NODE_LABEL
    exhausted = f"sum by ({node}) ({_exhausted(t)}) > 0"
    return [
        Alert(
            "GpuMemoryNearlyFull",
            # "used" alone is always near full (TF reserves memory up front): pressure is the
            # allocator failing on the model server that uses this GPU
            f"tokenpulse_gpu_memory_used_bytes{ex} / tokenpulse_gpu_memory_total_bytes{ex}"
            f" > {number(c.GPU_MEMORY_FULL)}\nand on ({node}) ({exhausted})",
            c.GPU_MEMORY_FOR,
            "warning",
            "A GPU's memory is exhausted: the model server's allocations fail.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) uses {{ $value | humanizePercentage }} "
            "of its memory while TF Serving on it answers RESOURCE_EXHAUSTED.",
        ),
        Alert(
            "GpuThrottled",
            f"max by ({gpu}, {r}) (rate(tokenpulse_gpu_throttle_seconds_total{policy}[{tw}]))"
            f" > {number(c.GPU_THROTTLE_SHARE)}\n"
            f"or max by ({gpu}, {r}) (avg_over_time(tokenpulse_gpu_throttle_reason_active{hw}"
            f"[{tw}])) > {number(c.GPU_THROTTLE_SHARE)}",
            c.GPU_THROTTLE_FOR,
            "warning",
            "A GPU is throttled by heat or a hardware slowdown much of the time.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) clocks were held down by heat or a "
            "hardware slowdown {{ $value | humanizePercentage }} of the last "
            f"{c.GPU_THROTTLE_WINDOW}.",
        ),
        Alert(
            "GpuTemperatureHigh",
            f"tokenpulse_gpu_temperature_celsius{ex} > {c.GPU_TEMPERATURE_C}",
            c.GPU_TEMPERATURE_FOR,
            "warning",
            "A GPU runs hot: it will throttle soon.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) is at {{ $value }} C (threshold "
            f"{c.GPU_TEMPERATURE_C} C).",
        ),
        Alert(
            "GpuRowRemapFailed",
            f"tokenpulse_gpu_row_remap_failed{ex} == 1",
            c.GPU_EVENT_FOR,
            "critical",
            "A GPU failed to remap a bad memory row: it needs service.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) on {{ $labels.instance }} reports a "
            "failed row remap (value {{ $value }}): its memory can corrupt results.",
        ),
        Alert(
            "GpuIdleWhileQueued",
            f"max by ({gpu}, {r}) (avg_over_time(tokenpulse_gpu_utilization_ratio{ex}"
            f"[{t(c.GPU_IDLE_WINDOW)}])) < {number(c.GPU_IDLE_UTILIZATION)}\n"
            f"and on () ({in_flight_per_replica(t(c.GPU_IDLE_WINDOW))}"
            f" >= {number(c.BATCH_IN_FLIGHT_MIN)})",
            c.GPU_IDLE_FOR,
            "warning",
            "A GPU idles while requests wait for the model server.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) is busy {{ $value | humanizePercentage }} "
            f"of the time over {c.GPU_IDLE_WINDOW} while the gateway keeps at least "
            f"{c.BATCH_IN_FLIGHT_MIN} calls in flight per model server: the model runs "
            "elsewhere (CPU) or is stuck.",
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
            # an age is a duration: compressed like the windows (600 s -> 10 s), or a drill
            # would wait 10 real minutes of store outage for a rule whose `for` is 10 s
            f"tokenpulse_shipper_oldest_unshipped_age_seconds{sel('shipper')}"
            f" > {t.secs(f'{c.SPOOL_BACKLOG_AGE_S}s')}",
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
            # chat, not a page: samples are not users' requests, the spool holds them, and
            # losing them (PipelineSamplesDropped) is a warning too
            "warning",
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
            # a sustained rate: a burst that fills the sink queue for a moment drops by design
            f"sum by (job, instance) (rate(tokenpulse_spool_records_dropped_total{gw}[{w}])"
            f" or rate(tokenpulse_gateway_samples_dropped_total{gw}[{w}]))"
            f" > {number(c.SAMPLES_DROPPED_RATE)}",
            c.SAMPLES_DROPPED_FOR,
            "warning",
            "The gateway keeps dropping sampled generations before they reach the spool.",
            'The gateway at {{ $labels.instance }} drops {{ $value | printf "%.2g" }} samples/s '
            f"over {c.PIPELINE_LOSS_WINDOW} (sink queue full, spool at its cap or write errors).",
        ),
        Alert(
            "PipelineSpoolNearlyFull",
            f"max by (job, instance) (tokenpulse_spool_size_bytes{gw}"
            f" / tokenpulse_spool_capacity_bytes{gw}) > {number(c.SPOOL_FULL_SHARE)}",
            c.SPOOL_FULL_FOR,
            "warning",
            "The sample spool's disk use nears its cap: new samples will be dropped.",
            "The spool of the gateway at {{ $labels.instance }} holds "
            "{{ $value | humanizePercentage }} of its cap (cap_bytes); past it new samples are "
            "dropped.",
        ),
    ]


def gateway_fleet_alerts() -> list[Alert]:
    """The whole gateway fleet paged down: the one cause that explains every model's gateway
    symptoms (one pod of several down explains only its own)."""
    paged = f'ALERTS{{alertname="{c.ALERT_PREFIX}GatewayDown",alertstate="firing"}}'
    return [
        Alert(
            "GatewayFleetDown",
            # no labels, like the fleet-wide symptoms it explains (SLO burns carry none of a pod)
            f"count({paged}) >= count(up{sel('gateway')})",
            # fires in the evaluation after the pages fire: it notifies nobody, it only inhibits
            "0s",
            "info",
            "Every gateway target is paged down at once.",
            "TokenPulseGatewayDown fires for every gateway target ({{ $value }}): the fleet-wide "
            "gateway symptoms it explains (SLO burns, traffic, throughput) are inhibited while "
            "it lasts.",
        )
    ]


def health_alerts(t: Timing) -> list[Alert]:
    """Every health alert."""
    return component_alerts(t) + gateway_fleet_alerts() + gpu_alerts(t) + pipeline_alerts(t)
