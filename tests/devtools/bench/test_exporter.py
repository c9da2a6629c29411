"""`tokenpulse bench exporter --json` runs end to end (figures only; no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_bench_reports_percentiles_and_rss():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stack.cli",
            "bench",
            "exporter",
            "--scrapes",
            "30",
            "--warmup",
            "2",
            "--fake-gpus",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    full = result["all_collectors"]
    assert full["scrapes"] == 30
    assert 0 < full["p50_ms"] <= full["p90_ms"] <= full["p99_ms"] <= full["max_ms"]
    assert full["rss_mb"] > 0 and full["cpu_ms_per_scrape"] >= 0
    assert set(full["collector_mean_ms"]) == {"nvml", "tfserving", "canary"}
    assert result["baseline_no_collectors"]["series"] < full["series"]
    assert result["nvml_backend"].startswith(("fake", "real"))
