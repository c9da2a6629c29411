"""GPU alerts from the exporter's nvml collector."""

from __future__ import annotations

from monitoring.mixin.alerts.common import exhausted, in_flight_per_replica
from monitoring.mixin.config import MixinConfig
from monitoring.mixin.model import Alert
from monitoring.mixin.promql import Timing, number


def alerts(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """GPU memory pressure, throttling, heat, row remaps, idling, XIDs, ECC, lost GPUs (exporter's
    nvml collector). A GPU joins the model servers on the same machine by cfg.node_label: on
    Kubernetes the node (the GPU exporter is a DaemonSet, no replica's witness); locally and on
    compose one machine, where the label is absent on both sides (absent equals absent)."""
    ex = cfg.sel("exporter")
    xids = cfg.sel("exporter", f'xid=~"{cfg.gpu_critical_xids}"')
    ecc = cfg.sel("exporter", 'type="uncorrected"')
    tw = t(cfg.gpu_throttle_window)
    policy = cfg.sel("exporter", f'policy="{cfg.gpu_throttle_policy}"')
    hw = cfg.sel("exporter", f'reason=~"{cfg.gpu_throttle_hw_reasons}"')
    gpu = "job, instance, gpu, uuid"
    r = f"{cfg.replica_label}, {cfg.node_label}"  # kept where present
    node = cfg.node_label
    refused = f"sum by ({node}) ({exhausted(cfg, t)}) > 0"
    return [
        Alert(
            "GpuMemoryNearlyFull",
            # "used" alone is always near full (TF reserves memory up front): pressure is the
            # allocator failing on the model server that uses this GPU
            f"tokenpulse_gpu_memory_used_bytes{ex} / tokenpulse_gpu_memory_total_bytes{ex}"
            f" > {number(cfg.gpu_memory_full)}\nand on ({node}) ({refused})",
            cfg.gpu_memory_for,
            "warning",
            "A GPU's memory is exhausted: the model server's allocations fail.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) uses {{ $value | humanizePercentage }} "
            "of its memory while TF Serving on it answers RESOURCE_EXHAUSTED.",
        ),
        Alert(
            "GpuThrottled",
            f"max by ({gpu}, {r}) (rate(tokenpulse_gpu_throttle_seconds_total{policy}[{tw}]))"
            f" > {number(cfg.gpu_throttle_share)}\n"
            f"or max by ({gpu}, {r}) (avg_over_time(tokenpulse_gpu_throttle_reason_active{hw}"
            f"[{tw}])) > {number(cfg.gpu_throttle_share)}",
            cfg.gpu_throttle_for,
            "warning",
            "A GPU is throttled by heat or a hardware slowdown much of the time.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) clocks were held down by heat or a "
            "hardware slowdown {{ $value | humanizePercentage }} of the last "
            f"{cfg.gpu_throttle_window}.",
        ),
        Alert(
            "GpuTemperatureHigh",
            f"tokenpulse_gpu_temperature_celsius{ex} > {cfg.gpu_temperature_c}",
            cfg.gpu_temperature_for,
            "warning",
            "A GPU runs hot: it will throttle soon.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) is at {{ $value }} C (threshold "
            f"{cfg.gpu_temperature_c} C).",
        ),
        Alert(
            "GpuRowRemapFailed",
            f"tokenpulse_gpu_row_remap_failed{ex} == 1",
            cfg.gpu_event_for,
            "critical",
            "A GPU failed to remap a bad memory row: it needs service.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) on {{ $labels.instance }} reports a "
            "failed row remap (value {{ $value }}): its memory can corrupt results.",
        ),
        Alert(
            "GpuIdleWhileQueued",
            f"max by ({gpu}, {r}) (avg_over_time(tokenpulse_gpu_utilization_ratio{ex}"
            f"[{t(cfg.gpu_idle_window)}])) < {number(cfg.gpu_idle_utilization)}\n"
            f"and on () ({in_flight_per_replica(cfg, t(cfg.gpu_idle_window))}"
            f" >= {number(cfg.batch_in_flight_min)})",
            cfg.gpu_idle_for,
            "warning",
            "A GPU idles while requests wait for the model server.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) is busy {{ $value | humanizePercentage }} "
            f"of the time over {cfg.gpu_idle_window} while the gateway keeps at least "
            f"{cfg.batch_in_flight_min} calls in flight per model server: the model runs "
            "elsewhere (CPU) or is stuck.",
        ),
        Alert(
            "GpuCriticalXid",
            # the timestamp, not increase(): increase() misses a counter's first event
            f"time() - tokenpulse_gpu_xid_last_timestamp_seconds{xids}"
            f" < {t.secs(cfg.gpu_xid_window)}",
            cfg.gpu_event_for,
            "critical",
            "A GPU reported a critical XID error.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) reported XID {{ $labels.xid }} "
            "{{ $value | humanizeDuration }} ago.",
        ),
        Alert(
            "GpuEccErrors",
            f"increase(tokenpulse_gpu_ecc_errors_total{ecc}[{t(cfg.gpu_ecc_window)}]) > 0",
            cfg.gpu_event_for,
            "warning",
            "A GPU reports uncorrected ECC errors.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) had {{ $value | humanize }} uncorrected "
            f"ECC errors in {cfg.gpu_ecc_window}.",
        ),
        Alert(
            "GpuLost",
            f"tokenpulse_gpu_lost{ex} == 1",
            cfg.gpu_lost_for,
            "critical",
            "A GPU has fallen off the bus or cannot be reached.",
            "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) is lost to NVML on {{ $labels.instance }}.",
        ),
    ]
