"""The scrape wrapper: a failing or crashing collector is data, never a failed scrape."""

from __future__ import annotations

import platform

from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily
from structlog.testing import capture_logs

from exporter.registry import CollectorError
from exporter.scrape import ScrapeCollector
from exporter.version import __version__
from tests.support.exporter import one_scrape, registry_of


class Good:
    def collect(self):
        yield GaugeMetricFamily("tokenpulse_test_good", "A fine series.", value=1)


class PartlyBroken:
    def collect(self):
        yield GaugeMetricFamily("tokenpulse_test_partial", "Collected before the failure.", value=7)
        raise CollectorError("half of it failed")


class Buggy:
    def collect(self):
        raise ZeroDivisionError("a bug")


def test_success_and_duration_for_every_collector():
    reg = one_scrape(
        registry_of(ScrapeCollector({"good": Good(), "partial": PartlyBroken(), "buggy": Buggy()}))
    )
    success = {
        name: reg.get_sample_value("tokenpulse_exporter_collector_success", {"collector": name})
        for name in ("good", "partial", "buggy")
    }
    assert success == {"good": 1, "partial": 0, "buggy": 0}
    for name in success:
        duration = reg.get_sample_value(
            "tokenpulse_exporter_collector_duration_seconds", {"collector": name}
        )
        assert duration is not None and duration >= 0


def test_what_a_collector_yielded_before_failing_is_kept():
    reg = registry_of(ScrapeCollector({"partial": PartlyBroken()}))
    assert reg.get_sample_value("tokenpulse_test_partial") == 7


def test_a_crashing_collector_does_not_fail_the_scrape():
    text = generate_latest(
        registry_of(ScrapeCollector({"buggy": Buggy(), "good": Good()}))
    ).decode()
    assert "tokenpulse_test_good 1.0" in text


def test_build_info():
    reg = registry_of(ScrapeCollector({}))
    labels = {"version": __version__, "python_version": platform.python_version()}
    assert reg.get_sample_value("tokenpulse_exporter_build_info", labels) == 1


def test_failures_are_logged_once_per_change():
    reg = registry_of(ScrapeCollector({"partial": PartlyBroken()}))
    with capture_logs() as logs:
        for _ in range(3):
            generate_latest(reg)
    failed = [e for e in logs if e.get("event") == "collector failed"]
    assert len(failed) == 1 and failed[0]["error"] == "half of it failed"
