"""`tokenpulse bench scale` runs 1, 2 and 3 replicas side by side and prints every figure."""

from __future__ import annotations

import json
import subprocess
import sys

from devtools.bench.scale import FIGURES

TINY = ["--standins", "--requests", "8", "--rounds", "1", "--concurrency", "2"]


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "stack.cli", "bench", "scale", *TINY, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=True)


def test_every_figure_is_reported_for_every_replica_count() -> None:
    result = json.loads(_bench("--json").stdout)
    assert set(result["by_replicas"]) == {"1", "2", "3"}
    assert result["requests_per_count"] == 8
    for n, row in result["by_replicas"].items():
        assert set(row) == set(FIGURES), n
        assert row["rps"] > 0 and row["p50_ms"] > 0 and row["gateway_cpu_ms_per_req"] >= 0
        # stand-ins neither batch nor have a CPU of their own
        assert row["batch_per_replica"] is None and row["server_cpu_ms_per_req"] is None
    one = result["by_replicas"]["1"]
    assert one["ratio_vs_1"] == 1 and one["efficiency"] == 1
    three = result["by_replicas"]["3"]
    assert three["efficiency"] == three["ratio_vs_1"] / 3


def test_the_table_names_the_cores_and_what_the_figures_show() -> None:
    out = _bench("--replicas", "1,2").stdout
    rows = [line.split() for line in out.splitlines() if line.strip()[:1] in ("1", "2")]
    assert [r[0] for r in rows] == ["1", "2"] and all(len(r) == 1 + 8 for r in rows)
    assert "CPU cores" in out and "per-replica overhead" in out
