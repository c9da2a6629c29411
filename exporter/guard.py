"""A deadline for collectors that call drivers: a hung call fails the collector, not the scrape.

NVML calls can hang (a wedged driver, a GPU in recovery); GPU exporters that call NVML on the
scrape thread then hang every scrape and pile up threads. The guarded collector runs on a worker
thread; past the deadline the scrape moves on with success 0, and while that call is still stuck
later scrapes fail at once instead of starting another.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client.core import Metric

from exporter.registry import Collector, CollectorError


class GuardedCollector:
    """Wraps a collector with a per-scrape deadline."""

    def __init__(self, collector: Collector, timeout_s: float) -> None:
        self._collector = collector
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._busy = False

    def collect(self) -> Iterator[Metric]:
        """The wrapped collector's families, or CollectorError when it is too slow or stuck."""
        with self._lock:
            if self._busy:
                raise CollectorError("previous collect is still running (hung driver call?)")
            self._busy = True
        families: list[Metric] = []
        errors: list[BaseException] = []
        done = threading.Event()

        def work() -> None:
            try:
                families.extend(self._collector.collect())
            except BaseException as exc:  # noqa: BLE001  (handed to the scrape thread below)
                errors.append(exc)
            finally:
                with self._lock:
                    self._busy = False
                done.set()

        threading.Thread(target=work, name="guarded-collect", daemon=True).start()
        if not done.wait(self._timeout_s):
            raise CollectorError(f"collect took longer than {self._timeout_s:g}s")
        yield from list(families)
        if errors:
            raise errors[0]
