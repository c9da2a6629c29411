"""The canary collector: per model/version gauges and run counters from the runner's results."""

from __future__ import annotations

import pytest

from exporter.collectors.canary import CanaryCollector
from exporter.scrape import ScrapeCollector
from exporter.tfserving.canary import CanaryResult
from tests.support.exporter import one_scrape, registry_of


class FakeRunner:
    def __init__(self, results, runs, alive=True, last=100.0):
        self._results, self._runs, self._alive, self._last = results, runs, alive, last

    def results(self):
        return self._results

    def runs(self):
        return self._runs

    def alive(self):
        return self._alive

    def last_cycle(self):
        return self._last


def _result(version, result, **kw):
    fields = {
        "model": "gen",
        "version": version,
        "finished_at": 99.0,
        "result": result,
        "error": None,
        "prompts": 4,
        "answered": 4,
        "matched": 4,
        "latency_s": 0.25,
        "similarity": 1.0,
        "mean_nll": 1.1,
        "golden_mean_nll": 1.1,
    }
    fields.update(kw)
    return CanaryResult(**fields)


def _reg(runner, now=100.0):
    collector = CanaryCollector(runner, stale_after_s=600, clock=lambda: now)
    return one_scrape(registry_of(ScrapeCollector({"canary": collector})))


def test_gauges_per_model_and_version():
    runner = FakeRunner(
        [
            _result(1, "ok"),
            _result(
                2,
                "mismatch",
                matched=1,
                similarity=0.4,
                mean_nll=3.5,
                golden_mean_nll=1.2,
                mismatch_nll_delta=0.9,
            ),
            _result(
                3,
                "error",
                error="predict failed",
                answered=0,
                matched=0,
                latency_s=None,
                similarity=None,
                mean_nll=None,
                golden_mean_nll=None,
            ),
        ],
        {("gen", 1, "ok"): 3, ("gen", 2, "mismatch"): 2, ("gen", 3, "error"): 1},
    )
    reg = _reg(runner)
    v1, v2, v3 = ({"model": "gen", "version": v} for v in ("1", "2", "3"))
    assert reg.get_sample_value("tokenpulse_canary_success", v1) == 1
    assert reg.get_sample_value("tokenpulse_canary_match", v1) == 1
    assert reg.get_sample_value("tokenpulse_canary_latency_seconds", v1) == 0.25
    assert reg.get_sample_value("tokenpulse_canary_success", v2) == 1
    assert reg.get_sample_value("tokenpulse_canary_match", v2) == 0
    assert reg.get_sample_value("tokenpulse_canary_match_ratio", v2) == 0.25
    assert reg.get_sample_value("tokenpulse_canary_similarity_ratio", v2) == 0.4
    assert reg.get_sample_value("tokenpulse_canary_mean_nll_nats", v2) == pytest.approx(3.5)
    assert reg.get_sample_value("tokenpulse_canary_golden_mean_nll_nats", v2) == pytest.approx(1.2)
    assert reg.get_sample_value("tokenpulse_canary_mismatch_nll_delta_nats", v2) == pytest.approx(
        0.9
    )
    assert reg.get_sample_value("tokenpulse_canary_success", v3) == 0
    assert reg.get_sample_value("tokenpulse_canary_match", v3) is None  # nothing to compare
    assert reg.get_sample_value("tokenpulse_canary_last_run_timestamp_seconds", v3) == 99.0
    assert reg.get_sample_value("tokenpulse_canary_runs_total", {**v2, "result": "mismatch"}) == 2
    assert (
        reg.get_sample_value("tokenpulse_exporter_collector_success", {"collector": "canary"}) == 1
    )


def test_dead_or_stuck_runner_fails_the_collector():
    success = ("tokenpulse_exporter_collector_success", {"collector": "canary"})
    assert _reg(FakeRunner([], {}, alive=False)).get_sample_value(*success) == 0
    assert _reg(FakeRunner([], {}, last=100.0), now=1000.0).get_sample_value(*success) == 0
    assert _reg(FakeRunner([], {}, last=None)).get_sample_value(*success) == 1
