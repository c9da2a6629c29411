"""A hung driver call fails the guarded collector, never the scrape, and does not pile up."""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry

from exporter.collectors.nvml import NvmlCollector
from exporter.guard import GuardedCollector
from exporter.nvml.fake import FakeNvmlBackend
from exporter.nvml.fields import load_fields
from exporter.nvml.session import NvmlSession
from exporter.scrape import ScrapeCollector
from tests.support.exporter import one_scrape, registry_of, two_gpu_backend, wait_for

SUCCESS = ("tokenpulse_exporter_collector_success", {"collector": "nvml"})
GPU0 = {"gpu": "0", "uuid": "GPU-00000000-1111-2222-3333-444444444444"}


class HangingBackend(FakeNvmlBackend):
    """temperature() blocks until released, like a wedged driver."""

    def __init__(self) -> None:
        fake = two_gpu_backend()
        super().__init__(fake.gpus, process_names=fake.process_names)
        self.hang = threading.Event()
        self.release = threading.Event()
        self.entered = 0

    def temperature(self, h):
        if self.hang.is_set():
            self.entered += 1
            self.release.wait(30)
        return super().temperature(h)


def test_hung_call_fails_the_collector_then_recovers():
    backend = HangingBackend()
    session = NvmlSession(backend, watch_xids=False)
    guarded = GuardedCollector(NvmlCollector(session, load_fields()), timeout_s=0.3)
    reg = registry_of(ScrapeCollector({"nvml": guarded}))
    assert reg.get_sample_value(*SUCCESS) == 1

    backend.hang.set()
    scrape = one_scrape(reg)  # returns after the deadline, with success 0
    assert scrape.get_sample_value(*SUCCESS) == 0
    assert reg.get_sample_value(*SUCCESS) == 0  # still stuck: fails at once...
    assert backend.entered == 1  # ...without starting another stuck call

    backend.hang.clear()
    backend.release.set()
    wait_for(lambda: reg.get_sample_value(*SUCCESS) == 1, what="recovery after the call returns")
    session.close()


def test_errors_and_partial_output_pass_through():
    backend = two_gpu_backend()
    backend.unavailable = "no driver"
    session = NvmlSession(backend, watch_xids=False)
    guarded = GuardedCollector(NvmlCollector(session, load_fields()), timeout_s=5)
    reg = one_scrape(registry_of(ScrapeCollector({"nvml": guarded})))
    assert reg.get_sample_value("tokenpulse_gpu_nvml_available") == 0
    assert reg.get_sample_value(*SUCCESS) == 0


def test_a_scrape_during_a_slow_call_shares_its_result():
    """Two scrapers at once (an HA Prometheus pair, two people with curl) both get the GPU
    series: the second joins the call in flight instead of failing with success 0."""
    backend = HangingBackend()
    session = NvmlSession(backend, watch_xids=False)
    guarded = GuardedCollector(NvmlCollector(session, load_fields()), timeout_s=20)
    reg = registry_of(ScrapeCollector({"nvml": guarded}))
    backend.hang.set()
    scrapes: dict[str, CollectorRegistry] = {}

    def scrape(name: str) -> None:
        scrapes[name] = one_scrape(reg)

    first = threading.Thread(target=scrape, args=("first",))
    first.start()
    wait_for(lambda: backend.entered == 1, what="the first scrape's driver call")
    second = threading.Thread(target=scrape, args=("second",))
    second.start()
    second.join(0.5)  # the old guard answered at once, with success 0
    backend.release.set()
    first.join(20)
    second.join(20)
    for name in ("first", "second"):
        assert scrapes[name].get_sample_value(*SUCCESS) == 1, name
        temperature = scrapes[name].get_sample_value("tokenpulse_gpu_temperature_celsius", GPU0)
        assert temperature is not None, name
    session.close()
