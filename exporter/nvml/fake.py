"""A fake NVML backend: GPUs as plain data, with injectable errors, lost GPUs, XID events and
thermal throttling.

Used by the tests, by `tokenpulse bench exporter` on machines without a GPU, and by
`--collector.nvml.backend=fake` for demos and drills (a running drill reaches it through the fault
file of exporter/nvml/fake_faults.py). It is never chosen implicitly.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporter.nvml.backend import (
    MemoryInfo,
    NvmlError,
    NvmlGpuLost,
    NvmlNotSupported,
    NvmlUnavailable,
    ProcessMemory,
    XidEvent,
)
from exporter.nvml.fake_faults import FaultFile, Faults
from exporter.nvml.fields import REASON_BITS

GiB = 1024**3
# A GPU held down by heat, as the driver reports it: the SW thermal slowdown reason (clocks capped
# because the GPU is above its max operating temperature), time on the thermal violation counter,
# and an SM clock at this share of its maximum.
THERMAL_REASON = REASON_BITS["sw_thermal_slowdown"]
THROTTLED_SM_SHARE = 0.6


@dataclass
class FakeGpu:
    """One simulated GPU, in NVML's units; None means the query is not supported."""

    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    pci_bus_id: str = "00000000:18:00.0"
    utilization: tuple[int, int] | None = (87, 41)
    memory: MemoryInfo | None = MemoryInfo(80 * GiB, 61 * GiB, 18 * GiB, 1 * GiB)
    temperature: float | None = 64.0
    memory_temperature: float | None = 71.0
    power_usage: int | None = 512_000  # mW
    power_limit: int | None = 700_000  # mW
    total_energy: int | None = 3_600_000_000  # mJ
    clocks: dict[str, int] = field(default_factory=lambda: {"sm": 1755, "mem": 2619})
    max_clocks: dict[str, int] = field(default_factory=lambda: {"sm": 1980, "mem": 2619})
    clocks_event_reasons: int | None = 0
    violation_ns: dict[str, int] = field(default_factory=lambda: {"power": 0, "thermal": 0})
    ecc_errors: dict[str, int] | None = field(
        default_factory=lambda: {"corrected": 0, "uncorrected": 0}
    )
    remapped_rows: tuple[int, int, int, int] | None = (0, 0, 0, 0)
    pcie_replays: int | None = 0
    pcie_throughput: dict[str, int] | None = field(
        default_factory=lambda: {"tx": 1_200_000, "rx": 350_000}
    )
    processes: list[ProcessMemory] = field(default_factory=list)
    xid_supported: bool = True
    lost: bool = False


class FakeNvmlBackend:
    """Implements NvmlBackend over FakeGpu records."""

    def __init__(
        self,
        gpus: list[FakeGpu],
        *,
        driver_version: str = "550.54.15",
        cuda_version: int = 12040,
        unavailable: str | None = None,
        process_names: dict[int, str] | None = None,
        faults_file: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.gpus = gpus
        self.driver = driver_version
        self.cuda = cuda_version
        self.unavailable = unavailable  # init() fails with this message
        self.process_names = dict(process_names or {})
        self.init_calls = 0
        self._failures: dict[tuple[str, int | None], tuple[NvmlError, int]] = {}
        self._events: queue.Queue[XidEvent] = queue.Queue()
        self._clock = clock
        self._lock = threading.Lock()  # the scrape and the XID watcher both refresh
        self._throttled: set[int] = set()
        self._advanced_at = clock()
        self._emitted: set[str] = set()  # fault-file XID ids already reported
        self.faults = FaultFile(faults_file, len(gpus)) if faults_file is not None else None

    # -- test controls -------------------------------------------------------------------------
    def fail(self, method: str, error: NvmlError, gpu: int | None = None, times: int = 1) -> None:
        """Make `method` raise `error` (on one GPU, or on all) for the next `times` calls."""
        self._failures[(method, gpu)] = (error, times)

    def emit_xid(self, gpu: int, xid: int) -> None:
        """The driver reports XID `xid` on GPU `gpu`."""
        self._events.put(XidEvent(self.gpus[gpu].uuid, xid))

    def thermal_throttle(self, gpu: int, on: bool) -> None:
        """Hold GPU `gpu` down by heat (or release it), from now."""
        with self._lock:
            self._advance()
            if on:
                self._throttled.add(gpu)
            else:
                self._throttled.discard(gpu)

    def throttled(self) -> set[int]:
        """The GPUs held down by heat now."""
        with self._lock:
            return set(self._throttled)

    def _advance(self) -> None:
        # a throttled GPU's thermal violation counter runs with wall time, as on real hardware
        now = self._clock()
        elapsed_ns = int((now - self._advanced_at) * 1e9)
        self._advanced_at = now
        for i in self._throttled:
            violation = self.gpus[i].violation_ns
            violation["thermal"] = violation.get("thermal", 0) + elapsed_ns

    def _refresh(self) -> None:
        """Bring the counters up to now and apply the fault file if it changed."""
        with self._lock:
            self._advance()
            faults = self.faults.poll() if self.faults is not None else None
            if faults is not None:
                self._apply(faults)

    def _apply(self, faults: Faults) -> None:
        self._throttled = set(faults.thermal_throttle)
        for x in faults.xids:
            if x.id not in self._emitted:
                self._emitted.add(x.id)
                self._events.put(XidEvent(self.gpus[x.gpu].uuid, x.xid))

    def _gpu(self, method: str, h: Any) -> FakeGpu:
        index = int(h)
        self._refresh()
        for key in ((method, index), (method, None)):
            if key in self._failures:
                error, times = self._failures[key]
                if times <= 1:
                    del self._failures[key]
                else:
                    self._failures[key] = (error, times - 1)
                raise error
        gpu = self.gpus[index]
        if gpu.lost:
            raise NvmlGpuLost(f"{method}: GPU is lost")
        return gpu

    @staticmethod
    def _have(value: Any, what: str) -> Any:
        if value is None:
            raise NvmlNotSupported(f"{what}: Not Supported")
        return value

    # -- NvmlBackend ---------------------------------------------------------------------------
    def init(self) -> None:
        self.init_calls += 1
        if self.unavailable:
            raise NvmlUnavailable(self.unavailable)

    def shutdown(self) -> None:
        pass

    def driver_version(self) -> str:
        return self.driver

    def cuda_driver_version(self) -> int:
        return self.cuda

    def device_count(self) -> int:
        return len(self.gpus)

    def handle(self, index: int) -> Any:
        self._gpu("handle", index)
        return index

    def name(self, h: Any) -> str:
        return self._gpu("name", h).name

    def uuid(self, h: Any) -> str:
        return self._gpu("uuid", h).uuid

    def pci_bus_id(self, h: Any) -> str:
        return self._gpu("pci_bus_id", h).pci_bus_id

    def utilization(self, h: Any) -> tuple[int, int]:
        return self._have(self._gpu("utilization", h).utilization, "utilization")

    def memory(self, h: Any) -> MemoryInfo:
        return self._have(self._gpu("memory", h).memory, "memory")

    def temperature(self, h: Any) -> float:
        return self._have(self._gpu("temperature", h).temperature, "temperature")

    def memory_temperature(self, h: Any) -> float:
        return self._have(self._gpu("memory_temperature", h).memory_temperature, "memory temp")

    def power_usage(self, h: Any) -> int:
        return self._have(self._gpu("power_usage", h).power_usage, "power usage")

    def power_limit(self, h: Any) -> int:
        return self._have(self._gpu("power_limit", h).power_limit, "power limit")

    def total_energy(self, h: Any) -> int:
        return self._have(self._gpu("total_energy", h).total_energy, "energy")

    def clock(self, h: Any, kind: str) -> int:
        gpu = self._gpu("clock", h)
        mhz = self._have(gpu.clocks.get(kind), f"clock {kind}")
        if kind == "sm" and int(h) in self.throttled() and "sm" in gpu.max_clocks:
            return min(mhz, int(gpu.max_clocks["sm"] * THROTTLED_SM_SHARE))
        return int(mhz)

    def max_clock(self, h: Any, kind: str) -> int:
        return self._have(self._gpu("max_clock", h).max_clocks.get(kind), f"max clock {kind}")

    def clocks_event_reasons(self, h: Any) -> int:
        gpu = self._gpu("clocks_event_reasons", h)
        reasons = self._have(gpu.clocks_event_reasons, "clocks event reasons")
        return int(reasons) | (THERMAL_REASON if int(h) in self.throttled() else 0)

    def violation_time(self, h: Any, policy: str) -> int:
        gpu = self._gpu("violation_time", h)
        return self._have(gpu.violation_ns.get(policy), f"violation {policy}")

    def ecc_errors(self, h: Any, kind: str) -> int:
        ecc = self._have(self._gpu("ecc_errors", h).ecc_errors, "ecc")
        return self._have(ecc.get(kind), f"ecc {kind}")

    def remapped_rows(self, h: Any) -> tuple[int, int, int, int]:
        return self._have(self._gpu("remapped_rows", h).remapped_rows, "remapped rows")

    def pcie_replays(self, h: Any) -> int:
        return self._have(self._gpu("pcie_replays", h).pcie_replays, "pcie replays")

    def pcie_throughput(self, h: Any, direction: str) -> int:
        tput = self._have(self._gpu("pcie_throughput", h).pcie_throughput, "pcie throughput")
        return self._have(tput.get(direction), f"pcie {direction}")

    def processes(self, h: Any) -> list[ProcessMemory]:
        return list(self._gpu("processes", h).processes)

    def process_name(self, pid: int) -> str:
        return self.process_names.get(pid, "")

    def xid_event_set(self) -> Any:
        return self._events

    def register_xid(self, h: Any, event_set: Any) -> None:
        if not self._gpu("register_xid", h).xid_supported:
            raise NvmlNotSupported("register events: Not Supported")

    def wait_xid(self, event_set: Any, timeout_ms: int) -> XidEvent | None:
        self._refresh()  # a fault file's XID is reported within a wait, scraped or not
        try:
            return self._events.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            return None

    def free_event_set(self, event_set: Any) -> None:
        pass


def demo_backend(
    n_gpus: int = 8, faults_file: Path | None = None, clock: Callable[[], float] = time.monotonic
) -> FakeNvmlBackend:
    """A busy simulated node for demos, benchmarks and drills: varied load, one GPU power-capped;
    with `faults_file`, the drill faults that file asks for (exporter/nvml/fake_faults.py)."""
    gpus = []
    for i in range(n_gpus):
        gpu = FakeGpu(
            uuid=f"GPU-fa4e0000-0000-4000-8000-{i:012d}",
            pci_bus_id=f"00000000:{0x18 + i:02x}:00.0",
            utilization=(60 + 5 * (i % 8), 30 + 3 * (i % 8)),
            processes=[ProcessMemory(1000 + i, 60 * GiB)],
        )
        if i == 1:
            gpu.clocks_event_reasons = 0x4  # sw power cap
        gpus.append(gpu)
    names = {1000 + i: "tensorflow_model_server" for i in range(n_gpus)}
    return FakeNvmlBackend(gpus, process_names=names, faults_file=faults_file, clock=clock)
