"""The receiver's /metrics: the Watchdog's arrivals, its own dead man's switch, heartbeat pings.

A collector that builds fresh families on every scrape from the objects passed in, holding no
state, on a registry of its own. Every series exists from the start (the ping counters at 0), so
`rate()` sees the first event.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from monitoring.oncall.deadman import ALERTNAME, DeadMansSwitch
from monitoring.oncall.heartbeat import RESULTS, Heartbeat

PREFIX = "tokenpulse_oncall_"


class OncallCollector:
    """Reads the switch, the Watchdog count and the heartbeat at each scrape."""

    def __init__(
        self,
        switch: DeadMansSwitch,
        arrivals: Callable[[], int],
        heartbeat: Heartbeat | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.switch = switch
        self.arrivals = arrivals
        self.heartbeat = heartbeat
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        """One family per fact."""
        state: dict[str, Any] = self.switch.state(self.clock())
        yield CounterMetricFamily(
            f"{PREFIX}watchdog_received", "Watchdog notifications received", self.arrivals()
        )
        last = GaugeMetricFamily(
            f"{PREFIX}watchdog_last_received_timestamp_seconds",
            "Unix time the Watchdog last arrived (absent: not yet)",
        )
        if self.switch.last is not None:
            last.add_metric([], self.switch.last)
        yield last
        yield GaugeMetricFamily(
            f"{PREFIX}watchdog_late_after_seconds",
            "Seconds of Watchdog silence after which the receiver pages",
            state["late_after_s"],
        )
        yield GaugeMetricFamily(
            f"{PREFIX}watchdog_missing",
            f"1 while the receiver's own page {ALERTNAME} fires",
            1.0 if state["missing"] else 0.0,
        )
        yield CounterMetricFamily(
            f"{PREFIX}watchdog_missing_pages", f"{ALERTNAME} pages recorded", state["pages"]
        )
        pings = CounterMetricFamily(
            f"{PREFIX}heartbeat_pings",
            "Pings relayed to the external dead man's switch, by result (none configured: 0)",
            labels=["result"],
        )
        counts = self.heartbeat.counts if self.heartbeat else dict.fromkeys(RESULTS, 0)
        for result in RESULTS:
            pings.add_metric([result], counts[result])
        yield pings
