"""The scrape wrapper: runs each enabled collector and turns its failure into data.

Every scrape emits `tokenpulse_exporter_collector_success{collector}` and
`tokenpulse_exporter_collector_duration_seconds{collector}` (node_exporter's
`node_scrape_collector_*`), so a broken collector is a series at 0 and a log line, never a 500.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily, Metric

from exporter.registry import Collector, CollectorError
from exporter.version import __version__
from tokenpulse.logging import get_logger

# Bound here too: contextvars bound in main() do not reach the exporter's threads.
log = get_logger(__name__).bind(component="exporter")


class ScrapeCollector:
    """A prometheus_client collector that runs named collectors and reports on each."""

    def __init__(self, collectors: Mapping[str, Collector]) -> None:
        self._collectors = dict(collectors)
        self._last_error: dict[str, str | None] = {}  # log changes, not every failing scrape

    def collect(self) -> Iterator[Metric]:
        """Run every collector; keep what each yielded before any failure."""
        success = GaugeMetricFamily(
            "tokenpulse_exporter_collector_success",
            "Whether the collector succeeded on this scrape (1) or failed (0).",
            labels=["collector"],
        )
        duration = GaugeMetricFamily(
            "tokenpulse_exporter_collector_duration_seconds",
            "How long the collector took on this scrape.",
            labels=["collector"],
            unit="seconds",
        )
        for name, collector in self._collectors.items():
            start = time.perf_counter()
            families, error = _run(collector)
            self._log_change(name, error)
            ok = error is None
            duration.add_metric([name], time.perf_counter() - start)
            success.add_metric([name], 1.0 if ok else 0.0)
            yield from families
        yield success
        yield duration
        yield build_info()

    def _log_change(self, name: str, error: str | None) -> None:
        previous = self._last_error.get(name)
        self._last_error[name] = error
        if error == previous:
            return
        if error is None:
            log.info("collector recovered", collector=name)
        else:
            log.warning("collector failed", collector=name, error=error)


def _run(collector: Collector) -> tuple[list[Metric], str | None]:
    """Drain one collector, catching everything: a collector bug must not fail the scrape."""
    families: list[Metric] = []
    try:
        for family in collector.collect():
            families.append(family)
    except CollectorError as exc:
        return families, str(exc)
    except Exception as exc:  # noqa: BLE001  (isolate collector bugs from the scrape)
        log.error("collector crashed", error=repr(exc), exc_info=True)
        return families, f"crashed: {exc!r}"
    return families, None


def build_info() -> GaugeMetricFamily:
    """`tokenpulse_exporter_build_info{version,python_version} 1`."""
    info = GaugeMetricFamily(
        "tokenpulse_exporter_build_info",
        "The exporter's version and the Python that runs it; always 1.",
        labels=["version", "python_version"],
    )
    info.add_metric([__version__, platform.python_version()], 1.0)
    return info
