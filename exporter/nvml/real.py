"""The real NVML backend over nvidia-ml-py (`pynvml`), translating its errors to typed ones."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pynvml

from exporter.nvml.backend import (
    MemoryInfo,
    NvmlError,
    NvmlGpuLost,
    NvmlNotSupported,
    NvmlUnavailable,
    ProcessMemory,
    XidEvent,
)

T = TypeVar("T")

# Errors that mean NVML as a whole is unusable, not one query on one device.
_UNAVAILABLE = (
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
    pynvml.NVML_ERROR_NO_PERMISSION,
    pynvml.NVML_ERROR_UNINITIALIZED,
    pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
    pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
)
_CLOCKS = {"sm": pynvml.NVML_CLOCK_SM, "mem": pynvml.NVML_CLOCK_MEM}
_POLICIES = {"power": pynvml.NVML_PERF_POLICY_POWER, "thermal": pynvml.NVML_PERF_POLICY_THERMAL}
_ECC = {
    "corrected": pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED,
    "uncorrected": pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
}
_VALUE_MEMBERS = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
}
_PCIE = {"tx": pynvml.NVML_PCIE_UTIL_TX_BYTES, "rx": pynvml.NVML_PCIE_UTIL_RX_BYTES}


def _call(fn: Callable[..., T], *args: Any) -> T:
    """Run one pynvml call; raise the matching typed error."""
    try:
        return fn(*args)
    except pynvml.NVMLError as exc:
        code = getattr(exc, "value", None)
        msg = f"{getattr(fn, '__name__', 'nvml')}: {exc}"
        if code == pynvml.NVML_ERROR_NOT_SUPPORTED:
            raise NvmlNotSupported(msg) from exc
        if code == pynvml.NVML_ERROR_GPU_IS_LOST:
            raise NvmlGpuLost(msg) from exc
        if code in _UNAVAILABLE:
            raise NvmlUnavailable(msg) from exc
        raise NvmlError(msg) from exc


class RealNvmlBackend:
    """NVML through pynvml; one instance per process."""

    def init(self) -> None:
        """nvmlInit; NvmlUnavailable when there is no library, driver or GPU."""
        try:
            _call(pynvml.nvmlInit)
        except NvmlError as exc:
            raise NvmlUnavailable(str(exc)) from exc

    def shutdown(self) -> None:
        """nvmlShutdown."""
        _call(pynvml.nvmlShutdown)

    def driver_version(self) -> str:
        """The kernel driver version, e.g. 550.54.15."""
        return str(_call(pynvml.nvmlSystemGetDriverVersion))

    def cuda_driver_version(self) -> int:
        """The CUDA version the driver supports, e.g. 12040."""
        return int(_call(pynvml.nvmlSystemGetCudaDriverVersion))

    def device_count(self) -> int:
        """How many GPUs NVML sees."""
        return int(_call(pynvml.nvmlDeviceGetCount))

    def handle(self, index: int) -> Any:
        """The device handle of GPU `index`."""
        return _call(pynvml.nvmlDeviceGetHandleByIndex, index)

    def name(self, h: Any) -> str:
        """Product name."""
        return str(_call(pynvml.nvmlDeviceGetName, h))

    def uuid(self, h: Any) -> str:
        """GPU UUID (GPU-...)."""
        return str(_call(pynvml.nvmlDeviceGetUUID, h))

    def pci_bus_id(self, h: Any) -> str:
        """PCI bus id, lower-case."""
        info = _call(pynvml.nvmlDeviceGetPciInfo, h)
        bus = info.busId
        return (bus.decode() if isinstance(bus, bytes) else str(bus)).lower()

    def utilization(self, h: Any) -> tuple[int, int]:
        """Percent of the sample period with a kernel running / memory being read or written."""
        u = _call(pynvml.nvmlDeviceGetUtilizationRates, h)
        return int(u.gpu), int(u.memory)

    def memory(self, h: Any) -> MemoryInfo:
        """Memory in bytes, with `reserved` from the v2 query when the driver has it."""
        try:
            m = _call(pynvml.nvmlDeviceGetMemoryInfo, h, pynvml.nvmlMemory_v2)
            return MemoryInfo(int(m.total), int(m.used), int(m.free), int(m.reserved))
        except NvmlError:
            m = _call(pynvml.nvmlDeviceGetMemoryInfo, h)
            return MemoryInfo(int(m.total), int(m.used), int(m.free), None)

    def temperature(self, h: Any) -> float:
        """Core temperature in celsius."""
        return float(_call(pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU))

    def memory_temperature(self, h: Any) -> float:
        """HBM temperature in celsius (a field value; not every GPU has it)."""
        values = _call(pynvml.nvmlDeviceGetFieldValues, h, [pynvml.NVML_FI_DEV_MEMORY_TEMP])
        v = values[0]
        if v.nvmlReturn != pynvml.NVML_SUCCESS:
            _call(pynvml._nvmlCheckReturn, v.nvmlReturn)
        member = _VALUE_MEMBERS.get(int(v.valueType), "uiVal")
        return float(getattr(v.value, member))

    def power_usage(self, h: Any) -> int:
        """Board power draw in mW."""
        return int(_call(pynvml.nvmlDeviceGetPowerUsage, h))

    def power_limit(self, h: Any) -> int:
        """Enforced power limit in mW."""
        return int(_call(pynvml.nvmlDeviceGetEnforcedPowerLimit, h))

    def total_energy(self, h: Any) -> int:
        """Energy since the driver loaded, in mJ."""
        return int(_call(pynvml.nvmlDeviceGetTotalEnergyConsumption, h))

    def clock(self, h: Any, kind: str) -> int:
        """Current clock in MHz."""
        return int(_call(pynvml.nvmlDeviceGetClockInfo, h, _CLOCKS[kind]))

    def max_clock(self, h: Any, kind: str) -> int:
        """Maximum clock in MHz."""
        return int(_call(pynvml.nvmlDeviceGetMaxClockInfo, h, _CLOCKS[kind]))

    def clocks_event_reasons(self, h: Any) -> int:
        """Bitmask of why clocks are held down right now."""
        return int(_call(pynvml.nvmlDeviceGetCurrentClocksEventReasons, h))

    def violation_time(self, h: Any, policy: str) -> int:
        """Accumulated ns the clocks were held down by this policy."""
        return int(_call(pynvml.nvmlDeviceGetViolationStatus, h, _POLICIES[policy]).violationTime)

    def ecc_errors(self, h: Any, kind: str) -> int:
        """Volatile (since driver load) ECC error count."""
        return int(
            _call(pynvml.nvmlDeviceGetTotalEccErrors, h, _ECC[kind], pynvml.NVML_VOLATILE_ECC)
        )

    def remapped_rows(self, h: Any) -> tuple[int, int, int, int]:
        """Rows remapped for correctable / uncorrectable errors, remap pending, remap failed."""
        corr, unc, pending, failed = _call(pynvml.nvmlDeviceGetRemappedRows, h)
        return int(corr), int(unc), int(pending), int(failed)

    def pcie_replays(self, h: Any) -> int:
        """PCIe replay counter."""
        return int(_call(pynvml.nvmlDeviceGetPcieReplayCounter, h))

    def pcie_throughput(self, h: Any, direction: str) -> int:
        """PCIe throughput in KB/s over NVML's last 20 ms sample."""
        return int(_call(pynvml.nvmlDeviceGetPcieThroughput, h, _PCIE[direction]))

    def processes(self, h: Any) -> list[ProcessMemory]:
        """Compute and graphics processes on the GPU and their memory."""
        seen: dict[int, ProcessMemory] = {}
        for fn in (
            pynvml.nvmlDeviceGetComputeRunningProcesses,
            pynvml.nvmlDeviceGetGraphicsRunningProcesses,
        ):
            for p in _call(fn, h):
                used = None if p.usedGpuMemory is None else int(p.usedGpuMemory)
                seen.setdefault(int(p.pid), ProcessMemory(int(p.pid), used))
        return list(seen.values())

    def process_name(self, pid: int) -> str:
        """The process name; /proc when NVML cannot tell (other pid namespace)."""
        try:
            return str(_call(pynvml.nvmlSystemGetProcessName, pid)).rsplit("/", 1)[-1]
        except NvmlError:
            try:
                return Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                return ""

    def xid_event_set(self) -> Any:
        """A new event set."""
        return _call(pynvml.nvmlEventSetCreate)

    def register_xid(self, h: Any, event_set: Any) -> None:
        """Deliver this GPU's XID critical errors to `event_set`."""
        _call(pynvml.nvmlDeviceRegisterEvents, h, pynvml.nvmlEventTypeXidCriticalError, event_set)

    def wait_xid(self, event_set: Any, timeout_ms: int) -> XidEvent | None:
        """The next XID event, or None after `timeout_ms` without one."""
        try:
            data = pynvml.nvmlEventSetWait(event_set, timeout_ms)
        except pynvml.NVMLError as exc:
            if getattr(exc, "value", None) == pynvml.NVML_ERROR_TIMEOUT:
                return None
            _call(pynvml._nvmlCheckReturn, getattr(exc, "value", pynvml.NVML_ERROR_UNKNOWN))
            raise
        if data.eventType != pynvml.nvmlEventTypeXidCriticalError:
            return None
        return XidEvent(uuid=self.uuid(data.device), xid=int(data.eventData))

    def free_event_set(self, event_set: Any) -> None:
        """Release an event set."""
        _call(pynvml.nvmlEventSetFree, event_set)
