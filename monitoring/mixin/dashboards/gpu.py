"""GPUs: NVML state first, then utilization, memory, heat, power, clocks, throttling, errors.

Every GPU panel says "no GPU / NVML unavailable" instead of an empty graph, and the first row
tells which it is, so a GPU-less host never looks like a broken dashboard.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard

from monitoring.mixin.config import MixinConfig
from monitoring.mixin.dashboards.panels import (
    RATE,
    Q,
    bad_above,
    new_dashboard,
    ok_above,
    query_variable,
    stat_panel,
    ts_panel,
)

BY = "instance, gpu"  # every GPU series is one host's GPU
NO_GPU = "no GPU / NVML unavailable"
XID = "tokenpulse_gpu_xid_errors_total"
NVML = {"0": ("NVML unavailable", "red"), "1": ("NVML OK", "green")}
# GPU core temperature: most data-centre GPUs slow down from about 85 C
TEMP_WARN, TEMP_HOT = 80.0, 87.0


def _sel(cfg: MixinConfig) -> str:
    # per host: the exporter's target (`instance`) is the host whose GPUs it reads, so series of two
    # hosts' GPU 0 stay apart
    return f'{cfg.jobs.selector("exporter")}, instance=~"$host", gpu=~"$gpu"'


def _state_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    ex = cfg.jobs.selector("exporter")
    return (
        d.with_row(dashboard.Row("GPU availability"))
        .with_panel(
            stat_panel(cfg,
                "NVML",
                "Whether the exporter could load NVML and talk to the driver. Unavailable: "
                "every GPU panel below is empty because there is nothing to read.",
                "none",
                [Q(f"min(tokenpulse_gpu_nvml_available{{{ex}}})", "nvml")],
                ok_above(1),
                mappings=NVML,
                no_value="exporter down",
                width=8,
            )
        )
        .with_panel(
            stat_panel(cfg,
                "GPUs seen",
                "GPUs the exporter reports; 0 on a host without GPUs.",
                "none",
                [Q(f"count(tokenpulse_gpu_info{{{ex}}}) or vector(0)", "gpus")],
                ok_above(1),
                mappings={"0": (NO_GPU, "red")},
                width=8,
            )
        )
        .with_panel(
            stat_panel(cfg,
                "GPUs lost",
                "GPUs that fell off the bus or stopped answering NVML (need a reset).",
                "none",
                [Q(f"sum(tokenpulse_gpu_lost{{{ex}}})", "lost")],
                bad_above(1),
                no_value=NO_GPU,
                width=8,
                runbooks=("TokenPulseGpuLost",),
            )
        )
    )  # fmt: skip


def _usage_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    sel = _sel(cfg)
    return (
        d.with_row(dashboard.Row("Usage"))
        .with_panel(
            ts_panel(cfg,
                "Utilization",
                "Share of the last sample period in which a kernel ran, and in which device "
                "memory was read or written.",
                "percentunit",
                [Q(f"max by ({BY}) (tokenpulse_gpu_utilization_ratio{{{sel}}})",
                  "{{instance}}/{{gpu}}"),
                 Q(f"max by ({BY}) (tokenpulse_gpu_memory_utilization_ratio{{{sel}}})",
                   "memory bus {{instance}}/{{gpu}}")],
                max_value=1,
                width=8,
                no_value=NO_GPU,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Memory",
                "Device memory used per GPU against its total; the dashed line is the share "
                "at which the memory alert fires.",
                "percentunit",
                [Q(f"max by ({BY}) (tokenpulse_gpu_memory_used_bytes{{{sel}}}) / max by ({BY}) "
                   f"(tokenpulse_gpu_memory_total_bytes{{{sel}}})", "used {{instance}}/{{gpu}}")],
                bad_above(cfg.gpu_memory_full),
                max_value=1,
                width=8,
                no_value=NO_GPU,
                runbooks=("TokenPulseGpuMemoryNearlyFull",),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Memory per process",
                "Device memory held by each process on each GPU.",
                "bytes",
                [Q(f"max by ({BY}, pid, process) (tokenpulse_gpu_process_memory_used_bytes"
                   f"{{{sel}}})", "{{instance}}/{{gpu}} {{process}} ({{pid}})")],
                width=8,
                no_value=NO_GPU,
            )
        )
    )  # fmt: skip


def _health_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    sel = _sel(cfg)
    return (
        d.with_row(dashboard.Row("Heat, power and clocks"))
        .with_panel(
            ts_panel(cfg,
                "Temperature",
                "GPU core and memory temperature.",
                "celsius",
                [Q(f"max by ({BY}) (tokenpulse_gpu_temperature_celsius{{{sel}}})",
                  "core {{instance}}/{{gpu}}"),
                 Q(f"max by ({BY}) (tokenpulse_gpu_memory_temperature_celsius{{{sel}}})",
                   "memory {{instance}}/{{gpu}}")],
                bad_above(TEMP_HOT, warn=TEMP_WARN),
                width=8,
                no_value=NO_GPU,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Power",
                "Board power draw and the limit the driver enforces.",
                "watt",
                [Q(f"max by ({BY}) (tokenpulse_gpu_power_usage_watts{{{sel}}})",
                  "draw {{instance}}/{{gpu}}"),
                 Q(f"max by ({BY}) (tokenpulse_gpu_power_limit_watts{{{sel}}})",
                   "limit {{instance}}/{{gpu}}")],
                width=8,
                no_value=NO_GPU,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Clocks",
                "Current SM and memory clocks against their maxima.",
                "hertz",
                [Q(f"max by ({BY}) (tokenpulse_gpu_sm_clock_hertz{{{sel}}})",
                  "sm {{instance}}/{{gpu}}"),
                 Q(f"max by ({BY}) (tokenpulse_gpu_sm_clock_max_hertz{{{sel}}})",
                   "sm max {{instance}}/{{gpu}}"),
                 Q(f"max by ({BY}) (tokenpulse_gpu_memory_clock_hertz{{{sel}}})",
                   "mem {{instance}}/{{gpu}}")],
                width=8,
                no_value=NO_GPU,
            )
        )
    )  # fmt: skip


def _errors_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    sel = _sel(cfg)
    return (
        d.with_row(dashboard.Row("Throttling and errors"))
        .with_panel(
            ts_panel(cfg,
                "Throttle reasons",
                "Clock-event reasons holding the clocks down now (1 = active); idle is normal, "
                "thermal and power reasons are not.",
                "short",
                [Q(f"max by ({BY}, reason) (tokenpulse_gpu_throttle_reason_active{{{sel}}}) > 0 "
                   f"or max by ({BY}) (tokenpulse_gpu_throttle_reason_active{{{sel}}}) * 0",
                   "{{instance}}/{{gpu}} {{reason}}")],
                bad_above(1),
                width=8,
                no_value=NO_GPU,
                runbooks=("TokenPulseGpuThrottled",),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "XID errors",
                "XID errors the driver reported in the interval: all codes per GPU, plus each "
                "code that occurred on its own line.",
                "short",
                [Q(f"sum by ({BY}, xid) (increase({XID}{{{sel}}}[{RATE}])) > 0 "
                   f"or sum by ({BY}) (increase({XID}{{{sel}}}[{RATE}]))",
                     "{{instance}}/{{gpu}} {{xid}}")],
                bad_above(1),
                width=8,
                no_value=NO_GPU,
                runbooks=("TokenPulseGpuCriticalXid",),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "ECC errors",
                "Corrected and uncorrected ECC errors in the interval; any uncorrected error "
                "needs attention.",
                "short",
                [Q(f"sum by ({BY}, type) (increase(tokenpulse_gpu_ecc_errors_total{{{sel}}}"
                   f"[{RATE}]))", "{{instance}}/{{gpu}} {{type}}")],
                bad_above(1),
                width=8,
                no_value=NO_GPU,
                runbooks=("TokenPulseGpuEccErrors",),
            )
        )
    )  # fmt: skip


def build(cfg: MixinConfig) -> dashboard.Dashboard:
    """The GPU dashboard."""
    ex = cfg.jobs.selector("exporter")
    d = new_dashboard(
        cfg.dashboard_uids["gpu"],
        "TokenPulse / GPUs",
        "GPU health from the exporter's NVML collector: availability, utilization, memory, "
        "temperature, power, clocks, throttling, XID and ECC errors.",
        ["tokenpulse", "gpu"],
    )
    hosts = f"label_values(tokenpulse_gpu_info{{{ex}}}, instance)"
    gpus = f'label_values(tokenpulse_gpu_info{{{ex}, instance=~"$host"}}, gpu)'
    d = d.with_variable(query_variable("host", "Host", hosts)).with_variable(
        query_variable("gpu", "GPU", gpus)
    )
    return _errors_row(cfg, _health_row(cfg, _usage_row(cfg, _state_row(cfg, d))))
