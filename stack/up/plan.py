"""`tokenpulse up`'s settings as a StackConfig: the component table's options for this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stack.config import RULES, GpuBackend, HaPorts, Ports, StackConfig, replica_ports
from stack.up.files import context_window
from stack.up.settings import HA_PORT_FIELDS, PORT_FIELDS, UpSettings

# `--fast-polls` (drills): every poll at a second, as the test stack (devtools/stack.py) runs
FAST_POLLS: dict[str, Any] = {
    "extra_flags": {
        "modelserver": ("--model_config_file_poll_wait_seconds=1",),
        "exporter": ("--tfserving.poll-interval=1",),
        # a refused store is retried 2 s apart at most: the default 30 s cap is half an hour
        # compressed, and a store that is back would wait that long to be noticed
        "shipper": ("--poll-interval-s=0.5", "--backoff-max-s=2"),
    },
    "modelserver_poll_s": 1.0,
}


def nvml_works() -> bool:
    """Whether NVML initialises on this machine (a driver and at least the library)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - any NVML error means: no usable GPU here
        return False
    return True


def gpu_backend(s: UpSettings) -> GpuBackend:
    """The exporter's GPU source; `auto` resolves to `real` or `off`."""
    if s.gpu_backend == "auto":
        return "real" if nvml_works() else "off"
    return s.gpu_backend


def gpu_faults_file(s: UpSettings) -> Path | None:
    """Where the fake GPUs read drill faults (exporter/nvml/fake_faults.py); None without them."""
    return s.path("gpu-faults.json") if s.gpu_backend == "fake" else None


def _tuning(s: UpSettings) -> dict[str, Any]:
    """FAST_POLLS when asked for, and the fake GPUs' fault file on the exporter's flags."""
    out: dict[str, Any] = dict(FAST_POLLS) if s.fast_polls else {}
    flags = dict(out.get("extra_flags", {}))
    faults = gpu_faults_file(s)
    if faults is not None:
        flags["exporter"] = (*flags.get("exporter", ()), f"--collector.nvml.fake-faults={faults}")
    return {**out, "extra_flags": flags}


def stack_config(s: UpSettings) -> StackConfig:
    """The stack `up` runs: fixed ports, the chosen rule set, both versions behind the gateway."""
    return StackConfig(
        run_dir=s.path(""),
        ports=Ports(**{name: int(getattr(s, name)) for name in PORT_FIELDS}),
        rules=RULES[s.rules],
        gpu_backend=gpu_backend(s),
        canary_interval_s=s.canary_interval_s,
        scrape_interval=s.scrape_interval,
        evaluation_interval=s.evaluation_interval,
        group_wait=s.group_wait,
        group_interval=s.group_interval,
        es_url=s.es_url,
        es_api_key=s.es_api_key,
        grafana_url=s.grafana_url,
        watchdog_interval=s.watchdog_interval,
        alertmanager_config=s.alertmanager_config.resolve() if s.alertmanager_config else None,
        start_timeout_s=s.start_timeout_s,
        replica_ports=replica_ports(s.rest_port, s.grpc_port, s.model_server_replicas),
        gateway={
            "canary_weight": s.canary_weight,
            "context_window_tokens": context_window(s),
            **({"status_poll_interval_s": 1} if s.fast_polls else {}),
        },
        fault_proxy_port=s.fault_proxy_port,
        es_fault_proxy_port=s.es_fault_proxy_port,
        spool_cap_bytes=s.spool_cap_bytes,
        ha=HaPorts(**{name: int(getattr(s, name)) for name in HA_PORT_FIELDS}) if s.ha else None,
        **_tuning(s),
    )
