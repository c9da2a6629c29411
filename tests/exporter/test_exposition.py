"""The fast text encoder writes exactly what prometheus_client's generate_latest writes."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, StateSetMetricFamily

from exporter.collectors.nvml import NvmlCollector
from exporter.exposition import encode
from exporter.nvml.fields import load_fields
from exporter.nvml.session import NvmlSession
from exporter.scrape import ScrapeCollector
from tests.support.exporter import one_scrape, registry_of, two_gpu_backend


class Odd:
    """Families that exercise escaping, special values, timestamps and created samples."""

    def collect(self):
        g = GaugeMetricFamily(
            "odd_gauge", 'Help with \\ backslash\nand "quotes".', labels=["a", "b"]
        )
        g.add_metric(['quote " here', "back\\slash\nnewline"], math.nan)
        g.add_metric(["inf", "é ünïcode"], math.inf, timestamp=1700000000.5)
        g.add_metric(["neg", "x"], -math.inf)
        g.add_metric(["big", "x"], 12345678901234.0)
        g.add_metric(["small", "x"], 1e-9)
        yield g
        c = CounterMetricFamily("odd_things_total", "Counted.", labels=["k"], created=None)
        c.add_metric(["v"], 3, created=1600000000.0)
        yield c
        s = StateSetMetricFamily("odd_state", "A state set.", labels=["m"])
        s.add_metric(["x"], {"on": True, "off": False})
        yield s
        yield GaugeMetricFamily("odd_empty", "No samples at all.")


def test_identical_to_prometheus_client_on_odd_families():
    reg = one_scrape(registry_of(Odd()))
    assert encode(reg.collect()) == generate_latest(reg)


def test_identical_on_client_metrics_and_the_exporters_own():
    live = CollectorRegistry()
    Counter("requests", "Requests.", ["code"], registry=live).labels("200").inc(2)
    Histogram("latency_seconds", "Latency.", registry=live).observe(0.3)
    Info("build", "Build.", registry=live).info({"version": "1"})
    Gauge("plain", "Plain.", registry=live).set(4)
    session = NvmlSession(two_gpu_backend(), watch_xids=False)
    live.register(ScrapeCollector({"nvml": NvmlCollector(session, load_fields())}))
    reg = one_scrape(live)
    text = encode(reg.collect())
    assert text == generate_latest(reg)
    assert b"tokenpulse_gpu_throttle_reason_active{" in text
