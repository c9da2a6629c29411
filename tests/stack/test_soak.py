"""`tokenpulse soak` against the drill stack (tests/stack/conftest.py): a short soak, ~30 s.

Healthy traffic must page nobody and fail no request; every process of the stack is sampled and
its RSS reported; soak-report.json holds the figures and every sample.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from stack import soak
from stack.drill.target import Note
from tests.e2e.upstack import UpStack
from tests.support.binaries import needs_prometheus
from tokenpulse.procs import child_pids

pytestmark = [pytest.mark.slow, needs_prometheus]


def test_rss_comes_from_proc_and_children_are_found() -> None:
    import os
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        mine = soak.rss_bytes(os.getpid())
        assert mine is not None and mine > 10 * 2**20
        assert child.pid in child_pids(os.getpid())
        assert f"me/{child.pid}" in soak.processes({"me": os.getpid()})
    finally:
        child.kill()
        child.wait()
    assert soak.rss_bytes(child.pid) is None


def _series(minutes: float, growth: float) -> soak.Series:
    """RSS sampled every 5 s: a start-up jump in the first tenth, then `growth` to the end."""
    n = int(minutes * 12) + 1
    warm_at = int(n * soak.WARMUP_SHARE)
    rss = [100 * 2**20 if i < warm_at else int(200 * 2**20 * (1 + growth * (i - warm_at) /
           (n - 1 - warm_at))) for i in range(n)]  # fmt: skip
    return soak.Series(1, [5.0 * i for i in range(n)], rss)


@pytest.mark.parametrize(
    ("minutes", "growth", "grew"),
    [(30, 0.10, True), (30, 0.03, False), (10, 0.06, True), (1, 0.50, False)],
)
def test_growth_after_the_warm_up_is_judged_on_long_soaks_only(
    minutes: float, growth: float, grew: bool
) -> None:
    rss = {"gateway": _series(minutes, growth).summary()}
    assert rss["gateway"]["growth_pct"] > 100 * growth  # the start-up jump is not the trend
    assert bool(soak.judge_growth(rss, max_growth_pct=5.0)) is grew
    result = soak.SoakResult(minutes, 2.0, rss=rss, grew=soak.judge_growth(rss, 5.0))
    assert result.passed is not grew
    assert ("grew beyond the bound" in soak.summary(result)) is grew


def test_a_gc_sawtooth_is_not_growth_and_third_party_processes_are_reported_only() -> None:
    # a heap that swings 60-70 MiB around a flat floor, as a garbage-collected process does
    saw = soak.Series(1, [5.0 * i for i in range(361)], [(60 + 10 * (i % 7 == 6)) * 2**20
                                                          for i in range(361)])  # fmt: skip
    assert abs(saw.summary()["growth_after_warmup_pct"]) < 1
    grows = _series(30, 0.10).summary()
    rss = {"prometheus": grows, "prometheus-2": grows, "alertmanager-2": grows,
           "shipper": _series(30, 0.03).summary()}  # fmt: skip
    assert soak.judge_growth(rss, max_growth_pct=5.0) == []
    result = soak.SoakResult(30, 2.0, rss=rss)
    lines = soak.summary(result).splitlines()
    for name in ("prometheus", "prometheus-2", "alertmanager-2"):  # with --ha, both of each
        assert "(not judged)" in next(line for line in lines if line.startswith(name + " "))


class _EndingIncident:
    """A stand-in for Target: an earlier incident's critical alert pending for its first 2.5 s,
    its page arriving 0.3 s in; then quiet, and traffic that all succeeds."""

    LABELS = {"alertname": "TokenPulseGatewayTokenLatencyBudgetBurn", "severity": "critical"}

    def __init__(self) -> None:
        self.t0 = time.time()
        self.page = Note(self.t0 + 0.3, "pager", "firing", self.LABELS["alertname"], self.LABELS)

    def firing(self, pending: bool = False) -> list[dict[str, str]]:
        return [self.LABELS] if time.time() < self.t0 + 2.5 else []

    def notes(self) -> list[Note]:
        return [self.page] if time.time() >= self.page.at else []

    def refresh(self) -> SimpleNamespace:
        return SimpleNamespace(pids={})

    @contextlib.contextmanager
    def traffic(self, rps: float) -> Iterator[SimpleNamespace]:
        yield SimpleNamespace(codes=[200, 200], failures=lambda: 0)


def test_a_soak_begins_once_an_earlier_incident_is_quiet_and_does_not_count_its_page() -> None:
    target = _EndingIncident()
    result, _ = soak.soak(target, soak.SoakSettings(minutes=0.01, sample_every_s=0.2))  # type: ignore[arg-type]
    # it waited for the pending alert to clear; the page that came meanwhile is not the soak's
    assert time.time() - target.t0 >= 2.5
    assert result.pages == [] and result.loud_before == [] and result.passed


def test_a_short_soak_pages_nobody_and_reports_rss(drill_stack: UpStack, tmp_path: Path) -> None:
    settings = soak.SoakSettings(
        minutes=0.5, rps=2.0, sample_every_s=2.0, run_dir=drill_stack.run_dir, report_dir=tmp_path
    )
    assert soak.run(settings) == 0
    doc = json.loads((tmp_path / "soak-report.json").read_text())
    assert doc["passed"] and doc["pages"] == [] and doc["failed_requests"] == 0
    assert doc["grew"] == []  # 30 s is too short to judge growth
    assert doc["requests"] >= 40 and set(doc["codes"]) <= {"200", "429"}
    components = {"modelserver", "gateway", "exporter", "shipper", "oncall", "alertmanager",
                  "prometheus", "faultproxy"}  # fmt: skip
    assert components <= set(doc["rss"])
    assert any(name.startswith("gateway/") for name in doc["rss"])  # the gateway's spool writer
    for name in components:
        figures = doc["rss"][name]
        assert figures["samples"] >= 10 and figures["last_mib"] > 1
        assert len(doc["samples"][name]["rss_bytes"]) == figures["samples"]
    assert doc["plot"] is None or (tmp_path / doc["plot"]).stat().st_size > 1000
