"""`tokenpulse bench gateway` runs side by side against an upstream and reports every figure."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from devtools.bench.gateway import nginx_binary
from devtools.bench.profiling import pyspy
from devtools.standins.tfserving import TfServingStandin

TINY = ["--requests", "4", "--throughput-requests", "8", "--rounds", "1", "--concurrency", "2"]


@pytest.fixture
def standin() -> Iterator[TfServingStandin]:
    with TfServingStandin() as server:
        yield server


def test_bench_reports_direct_and_gateway_figures(standin: TfServingStandin) -> None:
    cmd = [
        sys.executable, "-m", "stack.cli", "bench", "gateway", "--upstream", standin.url,
        "--requests", "10", "--throughput-requests", "16", "--rounds", "1", "--concurrency", "4",
        "--no-nginx", "--json",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(done.stdout)
    for name in ("direct", "gateway"):
        assert result[f"{name}_p50_ms"] > 0 and result[f"{name}_rps_c4"] > 0
    assert result["added_p50_ms"] == result["gateway_p50_ms"] - result["direct_p50_ms"]
    assert result["throughput_ratio"] == result["gateway_rps_c4"] / result["direct_rps_c4"]
    assert 0 < result["gateway_startup_s"] and 0 < result["gateway_rss_mb"]
    assert result["gateway_cpu_us_per_request"] > 0 and result["nginx"] == "off"
    # warmup, the c=1 pairs and both throughput phases all reached the upstream
    assert standin.predict_calls() == 2 * 20 + 2 * 10 + 2 * 16


def test_bench_without_a_model_says_what_to_do() -> None:
    cmd = [sys.executable, "-m", "stack.cli", "bench", "gateway", "--model-base-path", "/nope"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "make model" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed")
def test_bench_measures_nginx_and_gateway_variants_in_the_same_loops(
    standin: TfServingStandin,
) -> None:
    cmd = [
        sys.executable, "-m", "stack.cli", "bench", "gateway", "--upstream", standin.url, *TINY,
        "--nginx", "--variant", "event_loop=asyncio,access_log=false",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    assert "nginx anchor: measured" in done.stdout
    for name in ("direct", "gateway", "gw[event_loop=asyncio,access_log=false]", "nginx"):
        assert any(line.startswith(name + " ") for line in done.stdout.splitlines()), name
    # four paths, each warmed, at c=1 and in one throughput phase
    assert standin.predict_calls() == 4 * (20 + 4 + 8)


@pytest.mark.skipif(pyspy() is None, reason="py-spy is not installed")
def test_bench_profile_prints_the_gateways_top_entries(standin: TfServingStandin) -> None:
    cmd = [
        sys.executable, "-m", "stack.cli", "bench", "gateway", "--upstream", standin.url, *TINY,
        "--no-nginx", "--profile", "--json",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(done.stdout)
    profile = result["profile"]
    assert result["profiled"] and profile["samples"] > 0
    assert profile["self"] and profile["inclusive"] and profile["areas"]
    # the start-up's imports are counted apart (CI r97: they were most of the samples, and the
    # top inclusive entries were the import machinery's), so the top is the serving code
    assert profile["importing_samples"] > 0
    assert any("serving/gateway/" in name for _, name in profile["inclusive"])
