"""`tokenpulse up`'s settings as a StackConfig: the component table's options for this machine."""

from __future__ import annotations

from dataclasses import fields

from stack.config import GpuBackend, HaPorts, Ports, StackConfig, replica_ports
from stack.up.files import context_window
from stack.up.settings import HA_PORT_FIELDS, PORT_FIELDS, UpSettings

# the settings that are StackConfig fields of the same name and meaning, copied as they are
SAME = tuple(
    f.name for f in fields(StackConfig) if f.name in UpSettings.model_fields and f.name not in
    {"run_dir", "ports", "ha", "gpu_backend", "alertmanager_config", "training_cache_dir"}
)  # fmt: skip


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


def stack_config(s: UpSettings) -> StackConfig:
    """The stack `up` runs: fixed ports, the chosen rule set, both versions behind the gateway,
    every value resolved (`auto` GPUs, absolute paths)."""
    return StackConfig(
        run_dir=s.path(""),
        ports=Ports(**{name: int(getattr(s, name)) for name in PORT_FIELDS}),
        gpu_backend=gpu_backend(s),
        alertmanager_config=s.alertmanager_config.resolve() if s.alertmanager_config else None,
        training_cache_dir=s.training_cache_dir.resolve(),
        replica_ports=replica_ports(s.rest_port, s.grpc_port, s.model_server_replicas),
        gateway={"canary_weight": s.canary_weight, "context_window_tokens": context_window(s)},
        ha=HaPorts(**{name: int(getattr(s, name)) for name in HA_PORT_FIELDS}) if s.ha else None,
        **{name: getattr(s, name) for name in SAME},
    )
