"""The real pynvml backend: error mapping (with pynvml patched), no-library behaviour, and on a
machine with a GPU, the smoke script."""

from __future__ import annotations

import subprocess
import sys

import pynvml
import pytest

from exporter.nvml.backend import NvmlError, NvmlGpuLost, NvmlNotSupported, NvmlUnavailable
from exporter.nvml.real import RealNvmlBackend


def _nvml_works() -> bool:
    try:
        RealNvmlBackend().init()
        return True
    except NvmlError:
        return False


HAVE_GPU = _nvml_works()


def _raiser(code: int):
    def fn(*args):
        raise pynvml.NVMLError(code)

    return fn


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (pynvml.NVML_ERROR_NOT_SUPPORTED, NvmlNotSupported),
        (pynvml.NVML_ERROR_GPU_IS_LOST, NvmlGpuLost),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, NvmlUnavailable),
        (pynvml.NVML_ERROR_UNKNOWN, NvmlError),
    ],
)
def test_pynvml_errors_become_typed_errors(monkeypatch, code, error):
    monkeypatch.setattr(pynvml, "nvmlDeviceGetPowerUsage", _raiser(code))
    with pytest.raises(error):
        RealNvmlBackend().power_usage(object())


def test_event_wait_timeout_is_no_event(monkeypatch):
    monkeypatch.setattr(pynvml, "nvmlEventSetWait", _raiser(pynvml.NVML_ERROR_TIMEOUT))
    assert RealNvmlBackend().wait_xid(object(), 10) is None


def test_event_wait_gpu_lost_is_raised(monkeypatch):
    monkeypatch.setattr(pynvml, "nvmlEventSetWait", _raiser(pynvml.NVML_ERROR_GPU_IS_LOST))
    with pytest.raises(NvmlGpuLost):
        RealNvmlBackend().wait_xid(object(), 10)


@pytest.mark.skipif(HAVE_GPU, reason="NVML works on this machine")
def test_without_the_nvml_library_init_says_unavailable():
    with pytest.raises(NvmlUnavailable, match="nvmlInit"):
        RealNvmlBackend().init()


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU and driver")
def test_gpu_smoke_on_real_hardware():
    done = subprocess.run(
        [sys.executable, "-m", "exporter.gpu_smoke", "--collects", "50"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "tokenpulse_gpu_info{" in done.stdout
    assert "tokenpulse_gpu_memory_total_bytes{" in done.stdout
