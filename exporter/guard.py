"""A deadline for collectors that call drivers: a hung call fails the collector, not the scrape.

NVML calls can hang (a wedged driver, a GPU in recovery); GPU exporters that call NVML on the
scrape thread then hang every scrape and pile up threads. The guarded collector runs on a worker
thread; past the deadline the scrape moves on with success 0, and while that call is still stuck
later scrapes fail at once instead of starting another.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

from prometheus_client.core import Metric

from exporter.registry import Collector, CollectorError


class _Job:
    def __init__(self, deadline: float) -> None:
        self.families: list[Metric] = []
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.deadline = deadline


class GuardedCollector:
    """Wraps a collector with a per-scrape deadline, running it on one long-lived worker thread.

    Scrapes that arrive while a call is in flight and within its deadline share that call's
    result (single flight): two Prometheus servers of an HA pair scraping at once both get the
    GPU series, and the driver is asked once.
    """

    def __init__(self, collector: Collector, timeout_s: float) -> None:
        self._collector = collector
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._current: _Job | None = None
        self._worker: threading.Thread | None = None

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                job.families.extend(self._collector.collect())
            except BaseException as exc:  # noqa: BLE001  (handed to the scrape threads)
                job.error = exc
            finally:
                job.done.set()

    def _job(self) -> _Job:
        """The call in flight to join, or a new one; CollectorError if one is stuck."""
        with self._lock:
            job = self._current
            if job is not None and not job.done.is_set():
                if time.monotonic() >= job.deadline:
                    raise CollectorError("previous collect is still running (hung driver call?)")
                return job
            job = self._current = _Job(time.monotonic() + self._timeout_s)
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="guarded", daemon=True)
                self._worker.start()
            self._jobs.put(job)
            return job

    def collect(self) -> Iterator[Metric]:
        """The wrapped collector's families, or CollectorError when it is too slow or stuck."""
        job = self._job()
        if not job.done.wait(max(0.0, job.deadline - time.monotonic())):
            raise CollectorError(f"collect took longer than {self._timeout_s:g}s")
        yield from job.families
        if job.error is not None:
            raise job.error
