"""`tokenpulse bench stops` runs end to end on the tiny model (figures only, no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from devtools.bench.stops import STOP, prompt, trim


def test_quick_run_reports_both_modes_side_by_side(model_base: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "stops",
         "--model-base-path", str(model_base), "--quick", "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "4/4 requests per mode" in done.stderr  # progress goes to stderr
    doc = json.loads(done.stdout)
    rows = {r["mode"]: r for r in doc["results"]}
    assert set(rows) == {"in-graph", "trimmed"}
    for r in rows.values():
        assert r["requests"] == 4 and r["mean_ms"] > 0 and r["tokens_generated"] > 0
    graph, trimmed = rows["in-graph"], rows["trimmed"]
    assert doc["same_text"] == 4  # the model's cut is the one the gateway made
    assert graph["tokens_generated"] <= trimmed["tokens_generated"]
    assert trimmed["ended_by_stop"] == 0 and graph["max_tokens_per_request"] <= doc["cap"] <= 32
    assert set(doc["trimmed_vs_in_graph"]) == {"mean_latency", "p50_latency", "tokens_generated"}


def test_a_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "stops",
         "--model-base-path", str(tmp_path / "none"), "--quick"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "no model at" in done.stderr
    assert "Traceback" not in done.stderr


def test_prompts_are_few_shot_lines_and_the_trim_cuts_at_the_stop() -> None:
    assert prompt(0).count("\nQ: ") == 2 and prompt(0).endswith("?\nA:")
    assert trim(f" 4{STOP}Q: 5") == " 4" and trim(" 4") == " 4"
