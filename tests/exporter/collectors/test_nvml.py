"""The nvml collector against the fake backend: values in base units, faults, XIDs, golden file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from exporter.collectors.nvml import NvmlCollector
from exporter.nvml.backend import NvmlError, NvmlGpuLost, NvmlNotSupported
from exporter.nvml.fake import FakeNvmlBackend, GiB
from exporter.nvml.fields import load_fields
from exporter.nvml.session import PREINIT_XIDS, NvmlSession, XidCounts
from exporter.scrape import ScrapeCollector
from tests.support.exporter import (
    FIXED_TIME,
    one_scrape,
    promtool_check,
    registry_of,
    two_gpu_backend,
    wait_for,
)

GOLDEN = Path(__file__).parent / "golden" / "nvml_two_gpus.prom"
G0 = {"gpu": "0", "uuid": "GPU-00000000-1111-2222-3333-444444444444"}
G1 = {"gpu": "1", "uuid": "GPU-55555555-6666-7777-8888-999999999999"}


def _session(backend: FakeNvmlBackend, **kw) -> NvmlSession:
    return NvmlSession(backend, xids=XidCounts(clock=lambda: FIXED_TIME), **kw)


@pytest.fixture
def backend() -> FakeNvmlBackend:
    return two_gpu_backend()


@pytest.fixture
def session(backend: FakeNvmlBackend):
    s = _session(backend, watch_xids=False)
    yield s
    s.close()


def test_gpu_values_are_in_base_units(session):
    reg = registry_of(NvmlCollector(session, load_fields()))
    v = reg.get_sample_value
    assert v("tokenpulse_gpu_nvml_available") == 1
    assert v("tokenpulse_gpu_utilization_ratio", G0) == pytest.approx(0.87)
    assert v("tokenpulse_gpu_memory_used_bytes", G1) == 2 * GiB
    assert v("tokenpulse_gpu_memory_reserved_bytes", G1) == 1 * GiB
    assert v("tokenpulse_gpu_power_usage_watts", G1) == pytest.approx(698.5)
    assert v("tokenpulse_gpu_energy_consumed_joules_total", G0) == pytest.approx(3_600_000)
    assert v("tokenpulse_gpu_sm_clock_hertz", G1) == pytest.approx(1095e6)
    assert v("tokenpulse_gpu_temperature_celsius", G1) == 91
    assert v("tokenpulse_gpu_throttle_seconds_total", {**G1, "policy": "power"}) == 12.5
    assert v("tokenpulse_gpu_ecc_errors_total", {**G1, "type": "uncorrected"}) == 1
    assert v("tokenpulse_gpu_remapped_rows", {**G1, "cause": "correctable"}) == 2
    assert v("tokenpulse_gpu_row_remap_pending", G1) == 1
    assert v("tokenpulse_gpu_pcie_replays_total", G1) == 5
    assert v("tokenpulse_gpu_pcie_throughput_bytes_per_second", {**G0, "direction": "tx"}) == (
        1_200_000 * 1024
    )


def test_one_series_per_throttle_reason(session):
    reg = registry_of(NvmlCollector(session, load_fields()))
    active = {
        r: reg.get_sample_value("tokenpulse_gpu_throttle_reason_active", {**G1, "reason": r})
        for r in ("sw_power_cap", "hw_thermal_slowdown", "gpu_idle", "hw_slowdown")
    }
    assert active == {"sw_power_cap": 1, "hw_thermal_slowdown": 1, "gpu_idle": 0, "hw_slowdown": 0}
    assert (
        reg.get_sample_value(
            "tokenpulse_gpu_throttle_reason_active", {**G0, "reason": "sw_power_cap"}
        )
        == 0
    )


def test_info_series_and_per_process_memory(session):
    reg = registry_of(NvmlCollector(session, load_fields()))
    info = {
        **G0,
        "name": "NVIDIA H100 80GB HBM3",
        "pci_bus_id": "00000000:18:00.0",
        "driver_version": "550.54.15",
        "cuda_version": "12.4",
    }
    assert reg.get_sample_value("tokenpulse_gpu_info", info) == 1
    proc = {**G0, "pid": "4242", "process": "tensorflow_model_server"}
    assert reg.get_sample_value("tokenpulse_gpu_process_memory_used_bytes", proc) == 60 * GiB
    # A process whose memory NVML cannot report is left out rather than exported as 0.
    assert (
        reg.get_sample_value(
            "tokenpulse_gpu_process_memory_used_bytes", {**G0, "pid": "4343", "process": ""}
        )
        is None
    )


def test_unsupported_field_is_omitted_and_not_a_failure(session):
    reg = one_scrape(registry_of(ScrapeCollector({"nvml": NvmlCollector(session, load_fields())})))
    assert reg.get_sample_value("tokenpulse_gpu_memory_temperature_celsius", G0) == 71
    assert reg.get_sample_value("tokenpulse_gpu_memory_temperature_celsius", G1) is None
    assert reg.get_sample_value("tokenpulse_exporter_collector_success", {"collector": "nvml"}) == 1


def test_nvml_error_on_one_call_fails_the_collector_not_the_scrape(backend, session):
    backend.fail("power_usage", NvmlError("nvmlDeviceGetPowerUsage: Unknown Error"), gpu=1)
    live = registry_of(ScrapeCollector({"nvml": NvmlCollector(session, load_fields())}))
    reg = one_scrape(live)
    assert reg.get_sample_value("tokenpulse_exporter_collector_success", {"collector": "nvml"}) == 0
    assert reg.get_sample_value("tokenpulse_gpu_power_usage_watts", G1) is None
    assert reg.get_sample_value("tokenpulse_gpu_power_usage_watts", G0) == 512
    assert reg.get_sample_value("tokenpulse_gpu_temperature_celsius", G1) == 91
    # The fault was one call: the next scrape is whole again.
    assert (
        live.get_sample_value("tokenpulse_exporter_collector_success", {"collector": "nvml"}) == 1
    )


def test_gpu_lost_mid_run_is_reported_not_fatal(backend, session):
    live = registry_of(ScrapeCollector({"nvml": NvmlCollector(session, load_fields())}))
    assert live.get_sample_value("tokenpulse_gpu_lost", G1) == 0
    backend.gpus[1].lost = True
    reg = one_scrape(live)
    assert reg.get_sample_value("tokenpulse_gpu_lost", G1) == 1
    assert reg.get_sample_value("tokenpulse_gpu_utilization_ratio", G1) is None
    assert reg.get_sample_value("tokenpulse_gpu_utilization_ratio", G0) == pytest.approx(0.87)
    assert reg.get_sample_value("tokenpulse_exporter_collector_success", {"collector": "nvml"}) == 0


def test_gpu_lost_on_one_call_stops_that_gpu_only(backend, session):
    backend.fail("clock", NvmlGpuLost("GPU is lost"), gpu=0)
    live = registry_of(ScrapeCollector({"nvml": NvmlCollector(session, load_fields())}))
    reg = one_scrape(live)
    assert reg.get_sample_value("tokenpulse_gpu_lost", G0) == 1
    assert reg.get_sample_value("tokenpulse_gpu_lost", G1) == 0
    assert reg.get_sample_value("tokenpulse_gpu_utilization_ratio", G1) == pytest.approx(0.12)
    assert live.get_sample_value("tokenpulse_gpu_lost", G0) == 0  # the fault was one call


def test_no_nvml_library_reports_unavailable_and_retries(monkeypatch):
    backend = two_gpu_backend()
    backend.unavailable = "nvmlInit: NVML Shared Library Not Found"
    now = [100.0]
    session = NvmlSession(backend, retry_s=30, watch_xids=False, clock=lambda: now[0])
    reg = registry_of(ScrapeCollector({"nvml": NvmlCollector(session, load_fields())}))
    assert reg.get_sample_value("tokenpulse_gpu_nvml_available") == 0
    assert reg.get_sample_value("tokenpulse_exporter_collector_success", {"collector": "nvml"}) == 0
    assert reg.get_sample_value("tokenpulse_exporter_collector_success", {"collector": "nvml"}) == 0
    assert backend.init_calls == 1  # no retry storm: at most once per retry period
    backend.unavailable = None  # e.g. the driver finished loading
    now[0] += 31
    assert reg.get_sample_value("tokenpulse_gpu_nvml_available") == 1
    assert reg.get_sample_value("tokenpulse_gpu_utilization_ratio", G0) == pytest.approx(0.87)


def test_xid_events_counted_per_code_with_last_seen(backend):
    session = _session(backend)
    try:
        reg = registry_of(NvmlCollector(session, load_fields()))
        assert reg.get_sample_value("tokenpulse_gpu_xid_errors_total", {**G1, "xid": "79"}) == 0
        backend.emit_xid(1, 79)
        backend.emit_xid(1, 79)
        backend.emit_xid(0, 31)
        backend.emit_xid(1, 13)
        key = {**G1, "xid": "79"}
        wait_for(lambda: reg.get_sample_value("tokenpulse_gpu_xid_errors_total", key) == 2)
        wait_for(
            lambda: reg.get_sample_value("tokenpulse_gpu_xid_errors_total", {**G1, "xid": "13"})
        )
        assert reg.get_sample_value("tokenpulse_gpu_xid_errors_total", {**G0, "xid": "31"}) == 1
        assert reg.get_sample_value("tokenpulse_gpu_xid_last_timestamp_seconds", key) == FIXED_TIME
        assert (
            reg.get_sample_value("tokenpulse_gpu_xid_last_timestamp_seconds", {**G0, "xid": "79"})
            is None
        )
    finally:
        session.close()


def test_xid_unsupported_gpu_does_not_stop_the_watcher(backend):
    backend.gpus[0].xid_supported = False
    session = _session(backend)
    try:
        reg = registry_of(NvmlCollector(session, load_fields()))
        assert reg.get_sample_value("tokenpulse_gpu_nvml_available") == 1
        backend.emit_xid(1, 48)
        wait_for(
            lambda: reg.get_sample_value("tokenpulse_gpu_xid_errors_total", {**G1, "xid": "48"})
        )
    finally:
        session.close()


def test_golden_exposition_two_gpus_with_xids_and_throttling(backend):
    session = _session(backend)
    try:
        backend.emit_xid(1, 79)
        backend.emit_xid(1, 79)
        backend.emit_xid(0, 13)
        reg = registry_of(NvmlCollector(session, load_fields()))
        wait_for(
            lambda: (
                reg.get_sample_value("tokenpulse_gpu_xid_errors_total", {**G1, "xid": "79"}) == 2
                and reg.get_sample_value("tokenpulse_gpu_xid_errors_total", {**G0, "xid": "13"})
                == 1
            )
        )
        text = generate_latest(reg).decode()
    finally:
        session.close()
    if os.environ.get("TOKENPULSE_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), "regenerate with TOKENPULSE_UPDATE_GOLDEN=1 if intended"
    lint = promtool_check(text)
    assert lint.returncode == 0 and not (lint.stdout + lint.stderr).strip(), (
        lint.stdout + lint.stderr
    )


def test_preinitialised_xids_exist_for_every_gpu(session):
    reg = registry_of(NvmlCollector(session, load_fields()))
    for xid in PREINIT_XIDS:
        assert reg.get_sample_value("tokenpulse_gpu_xid_errors_total", {**G0, "xid": str(xid)}) == 0


def test_field_not_supported_on_every_gpu_just_disappears(backend, session):
    backend.fail("remapped_rows", NvmlNotSupported("Not Supported"), times=2)
    reg = one_scrape(registry_of(ScrapeCollector({"nvml": NvmlCollector(session, load_fields())})))
    assert (
        reg.get_sample_value("tokenpulse_gpu_remapped_rows", {**G0, "cause": "correctable"}) is None
    )
    assert reg.get_sample_value("tokenpulse_exporter_collector_success", {"collector": "nvml"}) == 1
