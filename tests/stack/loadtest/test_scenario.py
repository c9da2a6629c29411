"""`--scenario seed`: one load, three servers (naive, model server without and with batching)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stack import cli
from stack.loadtest.scenario import SERVERS

pytestmark = pytest.mark.slow


def test_the_seed_scenario_reports_mean_and_p99_per_server(
    tiny_export: Path, tmp_path: Path
) -> None:
    rc = cli.main([
        "loadtest", "--scenario", "seed", "--scenario-model", str(tiny_export), "--rate", "5",
        "--duration-s", "2", "--no-progress", "--report-dir", str(tmp_path),
    ])  # fmt: skip
    assert rc == 0
    doc = json.loads((tmp_path / "summary.json").read_text())
    rows = doc["scenario"]["rows"]
    assert [r["server"] for r in rows] == list(SERVERS)
    assert all(r["mean_s"] > 0 and r["p99_s"] >= r["p50_s"] for r in rows)
    assert all(r["errors"] == 0 and r["rate"] == 5 for r in rows)
    assert rows[2]["batch_size"] is not None and rows[0]["batch_size"] is None
    assert "CPU-only" in doc["scenario"]["note"] or "GPU:" in doc["scenario"]["note"]
    assert (tmp_path / "scenario.png").stat().st_size > 0
    assert "Seed scenario" in (tmp_path / "report.html").read_text()
