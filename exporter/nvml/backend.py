"""The NVML backend protocol: the calls the `nvml` collector makes, in NVML's own units.

The collector converts to base units; backends stay thin. The real backend maps pynvml's
exceptions onto the typed errors below, so nothing outside `exporter.nvml.real` imports pynvml.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class NvmlError(Exception):
    """An NVML call failed."""


class NvmlUnavailable(NvmlError):
    """NVML cannot be used at all: no library, no driver, no permission, no GPU."""


class NvmlNotSupported(NvmlError):
    """This device does not support this query; the field is simply omitted."""


class NvmlGpuLost(NvmlError):
    """The GPU fell off the bus (NVML_ERROR_GPU_IS_LOST)."""


@dataclass(frozen=True)
class MemoryInfo:
    """Device memory in bytes; `reserved` is None where only the v1 query works."""

    total: int
    used: int
    free: int
    reserved: int | None


@dataclass(frozen=True)
class ProcessMemory:
    """A process with a context on the GPU; `used_bytes` is None where NVML cannot tell."""

    pid: int
    used_bytes: int | None


@dataclass(frozen=True)
class XidEvent:
    """An XID critical error reported by the driver for one GPU."""

    uuid: str
    xid: int


class NvmlBackend(Protocol):
    """The NVML calls the exporter needs (each may raise an NvmlError)."""

    def init(self) -> None: ...
    def shutdown(self) -> None: ...
    def driver_version(self) -> str: ...
    def cuda_driver_version(self) -> int: ...  # e.g. 12040 for CUDA 12.4
    def device_count(self) -> int: ...
    def handle(self, index: int) -> Any: ...
    def name(self, h: Any) -> str: ...
    def uuid(self, h: Any) -> str: ...
    def pci_bus_id(self, h: Any) -> str: ...
    def utilization(self, h: Any) -> tuple[int, int]: ...  # percent: gpu, memory
    def memory(self, h: Any) -> MemoryInfo: ...
    def temperature(self, h: Any) -> float: ...  # celsius
    def memory_temperature(self, h: Any) -> float: ...  # celsius
    def power_usage(self, h: Any) -> int: ...  # milliwatts
    def power_limit(self, h: Any) -> int: ...  # milliwatts
    def total_energy(self, h: Any) -> int: ...  # millijoules since driver load
    def clock(self, h: Any, kind: str) -> int: ...  # MHz; kind "sm" or "mem"
    def max_clock(self, h: Any, kind: str) -> int: ...  # MHz
    def clocks_event_reasons(self, h: Any) -> int: ...  # bitmask
    def violation_time(self, h: Any, policy: str) -> int: ...  # ns; policy "power" or "thermal"
    def ecc_errors(self, h: Any, kind: str) -> int: ...  # volatile; "corrected" / "uncorrected"
    def remapped_rows(self, h: Any) -> tuple[int, int, int, int]: ...  # corr, unc, pending, fail
    def pcie_replays(self, h: Any) -> int: ...
    def pcie_throughput(self, h: Any, direction: str) -> int: ...  # KB/s; "tx" or "rx"
    def processes(self, h: Any) -> list[ProcessMemory]: ...
    def process_name(self, pid: int) -> str: ...
    def xid_event_set(self) -> Any: ...
    def register_xid(self, h: Any, event_set: Any) -> None: ...
    def wait_xid(self, event_set: Any, timeout_ms: int) -> XidEvent | None: ...  # None: timeout
    def free_event_set(self, event_set: Any) -> None: ...
