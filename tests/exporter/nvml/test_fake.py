"""The fake backend's drill faults, through the nvml collector as a scrape sees them."""

from __future__ import annotations

import json

import pytest

from exporter.collectors.nvml import NvmlCollector
from exporter.nvml.fake import THROTTLED_SM_SHARE, demo_backend
from exporter.nvml.fields import load_fields
from exporter.nvml.session import NvmlSession
from tests.support.exporter import registry_of, wait_for
from tokenpulse.atomic import atomic_write

G0 = {"gpu": "0", "uuid": "GPU-fa4e0000-0000-4000-8000-000000000000"}
G1 = {"gpu": "1", "uuid": "GPU-fa4e0000-0000-4000-8000-000000000001"}
THERMAL = {"policy": "thermal"}
SW_THERMAL = {"reason": "sw_thermal_slowdown"}


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _write(path, doc) -> None:
    atomic_write(path, doc if isinstance(doc, str) else json.dumps(doc))


@pytest.fixture
def node(tmp_path):
    """(fault file, clock, backend, registry) of a two-GPU demo node reading a fault file."""
    path = tmp_path / "gpu-faults.json"
    clock = Clock()
    backend = demo_backend(2, faults_file=path, clock=clock)
    session = NvmlSession(backend)
    yield path, clock, backend, registry_of(NvmlCollector(session, load_fields()))
    session.close()


def test_thermal_throttle_sets_the_reason_and_runs_the_violation_counter(node):
    path, clock, _, reg = node
    v = reg.get_sample_value
    assert v("tokenpulse_gpu_throttle_reason_active", {**G1, **SW_THERMAL}) == 0
    assert v("tokenpulse_gpu_throttle_seconds_total", {**G1, **THERMAL}) == 0
    _write(path, {"thermal_throttle": [1]})
    assert v("tokenpulse_gpu_throttle_reason_active", {**G1, **SW_THERMAL}) == 1
    assert v("tokenpulse_gpu_throttle_reason_active", {**G0, **SW_THERMAL}) == 0
    # GPU 1's own power cap stays set beside the heat
    assert v("tokenpulse_gpu_throttle_reason_active", {**G1, "reason": "sw_power_cap"}) == 1
    assert v("tokenpulse_gpu_sm_clock_hertz", G1) == pytest.approx(
        int(1980 * THROTTLED_SM_SHARE) * 1e6
    )
    clock.now += 7.5
    assert v("tokenpulse_gpu_throttle_seconds_total", {**G1, **THERMAL}) == pytest.approx(7.5)
    assert v("tokenpulse_gpu_throttle_seconds_total", {**G0, **THERMAL}) == 0
    _write(path, {})
    assert v("tokenpulse_gpu_throttle_reason_active", {**G1, **SW_THERMAL}) == 0
    clock.now += 30
    # released: the counter keeps its time and stops
    assert v("tokenpulse_gpu_throttle_seconds_total", {**G1, **THERMAL}) == pytest.approx(7.5)
    assert v("tokenpulse_gpu_sm_clock_hertz", G1) == pytest.approx(1755e6)


def test_each_xid_id_is_reported_once(node):
    path, _, _, reg = node

    def count(xid: str, gpu=G0) -> float | None:
        return reg.get_sample_value("tokenpulse_gpu_xid_errors_total", {**gpu, "xid": xid})

    assert count("79") == 0
    _write(path, {"xids": [{"id": "d1", "gpu": 0, "xid": 79}]})
    wait_for(lambda: count("79") == 1, what="the XID reported")
    assert reg.get_sample_value("tokenpulse_gpu_xid_last_timestamp_seconds", {**G0, "xid": "79"})
    _write(path, {})
    _write(path, {"xids": [{"id": "d1", "gpu": 0, "xid": 79}, {"id": "d2", "gpu": 1, "xid": 48}]})
    wait_for(lambda: count("48", G1) == 1, what="the new id reported")
    assert count("79") == 1  # d1 again: already reported


def test_a_bad_file_keeps_the_faults_and_the_scrape(node):
    path, clock, backend, reg = node
    v = reg.get_sample_value
    _write(path, {"thermal_throttle": [1]})
    assert v("tokenpulse_gpu_throttle_reason_active", {**G1, **SW_THERMAL}) == 1
    _write(path, '{"thermal_throttle": [0], "typo": 1}')
    assert v("tokenpulse_gpu_nvml_available") == 1
    assert v("tokenpulse_gpu_throttle_reason_active", {**G1, **SW_THERMAL}) == 1
    assert v("tokenpulse_gpu_throttle_reason_active", {**G0, **SW_THERMAL}) == 0
    assert backend.faults is not None and backend.faults.rejected == 1
    _write(path, "not json")
    clock.now += 2
    assert v("tokenpulse_gpu_throttle_seconds_total", {**G1, **THERMAL}) == pytest.approx(2)
    assert backend.faults.rejected == 2


def test_without_a_fault_file_nothing_changes():
    backend = demo_backend(2)
    assert backend.faults is None
    assert backend.clocks_event_reasons(0) == 0 and backend.violation_time(0, "thermal") == 0
