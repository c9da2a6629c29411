"""Helpers for the exporter's tests: fake GPUs, golden canary files, waiting, scraping."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

from prometheus_client import CollectorRegistry

from exporter.nvml.backend import MemoryInfo, ProcessMemory
from exporter.nvml.fake import FakeGpu, FakeNvmlBackend, GiB
from exporter.registry import Collector
from stack.launch import wait_until as wait_for  # noqa: F401 - the exporter tests' name

FIXED_TIME = 1_767_225_600.0  # 2026-01-01T00:00:00Z: fixed clock for golden files


def two_gpu_backend() -> FakeNvmlBackend:
    """Two fake GPUs: 0 busy with TF Serving; 1 throttled, with ECC errors and no HBM temp."""
    gpu0 = FakeGpu(
        uuid="GPU-00000000-1111-2222-3333-444444444444",
        pci_bus_id="00000000:18:00.0",
        processes=[ProcessMemory(4242, 60 * GiB), ProcessMemory(4343, None)],
    )
    gpu1 = FakeGpu(
        uuid="GPU-55555555-6666-7777-8888-999999999999",
        pci_bus_id="00000000:2a:00.0",
        utilization=(12, 3),
        memory=MemoryInfo(80 * GiB, 2 * GiB, 77 * GiB, 1 * GiB),
        temperature=91.0,
        memory_temperature=None,  # not supported on this board: the field is omitted
        power_usage=698_500,
        clocks={"sm": 1095, "mem": 2619},
        clocks_event_reasons=0x4 | 0x40,  # sw power cap + hw thermal slowdown
        violation_ns={"power": 12_500_000_000, "thermal": 3_000_000_000},
        ecc_errors={"corrected": 17, "uncorrected": 1},
        remapped_rows=(2, 1, 1, 0),
        pcie_replays=5,
    )
    return FakeNvmlBackend([gpu0, gpu1], process_names={4242: "tensorflow_model_server"})


def registry_of(*collectors: Collector) -> CollectorRegistry:
    """A fresh registry holding just these collectors."""
    registry = CollectorRegistry()
    for collector in collectors:
        registry.register(collector)
    return registry


class _Frozen:
    def __init__(self, families: list[object]) -> None:
        self._families = families

    def collect(self) -> list[object]:
        return self._families


def one_scrape(registry: CollectorRegistry) -> CollectorRegistry:
    """A registry frozen at one scrape: its get_sample_value reads that scrape only."""
    frozen = CollectorRegistry()
    frozen.register(_Frozen(list(registry.collect())))  # type: ignore[arg-type]
    return frozen


def write_golden(
    base_path: Path, version: int, prompts: list[tuple[str, str, float]], model: str = "gen"
) -> Path:
    """Write `<base>/<version>/assets.extra/golden_canary.json` with (prompt, text, nll) rows."""
    path = base_path / str(version) / "assets.extra" / "golden_canary.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "model": model,
        "version": version,
        "max_new_tokens": 8,
        "request": {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0},
        "prompts": [
            {
                "prompt": p,
                "text": t,
                "mean_nll": n,
                "output_tokens": len(t),
                "finish_reason": "length",
            }
            for p, t, n in prompts
        ],
    }
    path.write_text(json.dumps(doc))
    return path


def scrape(url: str) -> str:
    """GET a metrics page."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


def scrape_until(url: str, needle: str, timeout_s: float = 30.0) -> str:
    """Scrape until the page contains `needle` (refused connections count as not yet)."""

    def page() -> str | None:
        try:
            text = scrape(url)
        except OSError:
            return None
        return text if needle in text else None

    return str(wait_for(page, timeout_s, what=f"{needle!r} on {url}"))


def promtool_check(text: str) -> subprocess.CompletedProcess[str]:
    """`promtool check metrics` on an exposition (lint problems come back on stdout/stderr)."""
    return subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
