"""NVML lifecycle for the exporter: lazy init with retry, device identities, the XID thread.

A missing library or driver is not fatal: the session reports itself unavailable and retries
init now and then (an exporter that never recovers after the first failure is a known weakness of
GPU exporters). The XID watcher blocks in `nvmlEventSetWait` on its own thread and counts events.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from exporter.nvml.backend import NvmlBackend, NvmlError, NvmlNotSupported
from tokenpulse.logging import get_logger

# Bound here too: contextvars bound in main() do not reach the exporter's threads.
log = get_logger(__name__).bind(component="exporter")

# XIDs that need a person (double-bit ECC, fell off the bus, NVLink, GSP, uncontained errors...):
# the codes nvidia_gpu_exporter suggests alerting on. They are exported at 0 from the start so
# that `increase()` sees their first occurrence, which it misses on a brand-new series. Other
# codes appear when first seen (alert on `..._xid_last_timestamp_seconds` to catch those).
PREINIT_XIDS = (48, 62, 64, 74, 79, 95, 119, 120)


@dataclass(frozen=True)
class Device:
    """A GPU's identity, read once at init (it does not change while the driver is loaded)."""

    index: int
    handle: Any
    uuid: str
    name: str
    pci_bus_id: str
    lost_at_init: bool = False


class XidCounts:
    """Thread-safe XID counters per (uuid, xid) with the time each was last seen."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, int], int] = {}
        self._last: dict[tuple[str, int], float] = {}

    def preinit(self, uuid: str, xids: tuple[int, ...] = PREINIT_XIDS) -> None:
        """Start these XIDs at 0 for a GPU."""
        with self._lock:
            for xid in xids:
                self._counts.setdefault((uuid, xid), 0)

    def record(self, uuid: str, xid: int) -> None:
        """Count one event, now."""
        with self._lock:
            self._counts[(uuid, xid)] = self._counts.get((uuid, xid), 0) + 1
            self._last[(uuid, xid)] = self._clock()

    def read(self) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], float]]:
        """Copies of the counts and the last-seen times."""
        with self._lock:
            return dict(self._counts), dict(self._last)


class NvmlSession:
    """Owns NVML init/shutdown, the device list and the XID watcher for one backend."""

    def __init__(
        self,
        backend: NvmlBackend,
        *,
        retry_s: float = 30.0,
        watch_xids: bool = True,
        clock: Callable[[], float] = time.monotonic,
        xids: XidCounts | None = None,
    ) -> None:
        self.backend = backend
        self._retry_s = retry_s
        self._watch_xids = watch_xids
        self._clock = clock
        self._lock = threading.Lock()
        self._ready = False
        self._last_try: float | None = None
        self.error: str | None = "nvml not initialised yet"
        self.devices: tuple[Device, ...] = ()
        self.driver_version = ""
        self.cuda_version = ""
        self.xids = xids or XidCounts()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def ensure(self) -> bool:
        """Initialise NVML if it is not (at most once per retry period); True when usable."""
        with self._lock:
            if self._ready:
                return True
            now = self._clock()
            if self._last_try is not None and now - self._last_try < self._retry_s:
                return False
            self._last_try = now
            try:
                self._init()
            except NvmlError as exc:
                if self.error != str(exc):
                    log.warning("nvml unavailable", error=str(exc))
                self.error = str(exc)
                return False
            self._ready, self.error = True, None
            log.info("nvml ready", gpus=len(self.devices), driver=self.driver_version)
            if self._watch_xids and self.devices:
                self._thread = threading.Thread(target=self._watch, name="nvml-xid", daemon=True)
                self._thread.start()
            return True

    def _init(self) -> None:
        b = self.backend
        b.init()
        self.driver_version = b.driver_version()
        cuda = b.cuda_driver_version()
        self.cuda_version = f"{cuda // 1000}.{cuda % 1000 // 10}"
        devices = []
        for index in range(b.device_count()):
            try:
                h = b.handle(index)
                devices.append(Device(index, h, b.uuid(h), b.name(h), b.pci_bus_id(h)))
            except NvmlError as exc:  # one broken GPU must not hide the others
                log.error("gpu unusable at init", gpu=index, error=str(exc))
                devices.append(Device(index, None, "", "", "", lost_at_init=True))
        for d in devices:
            if d.uuid:
                self.xids.preinit(d.uuid)
        self.devices = tuple(devices)

    def _watch(self) -> None:
        b = self.backend
        try:
            event_set = b.xid_event_set()
        except NvmlError as exc:
            log.warning("xid events unavailable", error=str(exc))
            return
        watched = 0
        for d in self.devices:
            if d.handle is None:
                continue
            try:
                b.register_xid(d.handle, event_set)
                watched += 1
            except NvmlNotSupported:
                log.info("xid events not supported", gpu=d.index)
            except NvmlError as exc:
                log.warning("xid registration failed", gpu=d.index, error=str(exc))
        while watched and not self._stop.is_set():
            try:
                event = b.wait_xid(event_set, 500)
            except NvmlError as exc:
                log.warning("xid wait failed", error=str(exc))
                self._stop.wait(1.0)  # a lost GPU fails every wait: do not spin
                continue
            if event is not None:
                log.error("gpu xid", uuid=event.uuid, xid=event.xid)
                self.xids.record(event.uuid, event.xid)
        try:
            b.free_event_set(event_set)
        except NvmlError:
            pass

    def close(self) -> None:
        """Stop the XID watcher and shut NVML down."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._ready:
            try:
                self.backend.shutdown()
            except NvmlError as exc:
                log.warning("nvml shutdown failed", error=str(exc))
            self._ready = False
