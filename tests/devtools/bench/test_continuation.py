"""`tokenpulse bench continuation` runs end to end on the tiny model (figures only)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.bench.continuation import TARGET_RATIO, Mode, choose_chunk


def test_quick_run_reports_every_mode_side_by_side(model_base: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "continuation",
         "--model-base-path", str(model_base), "--quick", "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "c=4 round 1/1: chunk 4" in done.stderr  # progress goes to stderr
    doc = json.loads(done.stdout)
    rows = {(r["concurrency"], r["mode"]): r for r in doc["results"]}
    assert set(rows) == {(c, m) for c in (1, 4) for m in ("unary", "chunk 4")}
    for (conc, mode), r in rows.items():
        assert r["requests"] > 0 and r["errors"] == 0 and r["tokens"] > 0
        assert 1.0 <= r["mean_batch"] <= conc  # read from the server's own histogram
        if mode == "unary":
            assert r["calls"] == r["requests"] and r["tokens_per_s_vs_unary"] == 1.0
        else:  # 8 tokens in chunks of 4: two calls, or fewer when a row stops early
            assert r["requests"] <= r["calls"] <= 3 * r["requests"]
    assert doc["chosen_chunk"]["chunk"] == 4 and doc["chosen_chunk"]["concurrency"] == 4


def row(chunk: int, conc: int, ratio: float, growth: int = 1) -> dict:
    name = f"chunk {chunk}x{growth}" if growth > 1 else f"chunk {chunk}"
    return {"mode": name, "chunk": chunk, "growth": growth, "concurrency": conc,
            "tokens_per_s_vs_unary": ratio}  # fmt: skip


def test_the_chunk_rule_takes_the_smallest_fast_enough_at_the_top_level() -> None:
    rows = [row(0, 32, 1.0), row(4, 32, 0.6), row(8, 32, TARGET_RATIO), row(16, 32, 0.95)]
    rows += [row(4, 8, 0.9)]  # a lower level does not decide
    assert choose_chunk(rows)["chunk"] == 8
    growing = [*rows, row(8, 32, 0.9, growth=2), row(4, 32, 0.85, growth=2)]
    assert choose_chunk(growing)["mode"] == "chunk 4x2"
    slow = [row(0, 32, 1.0), row(4, 32, 0.5), row(8, 32, 0.7), row(16, 32, 0.6)]
    assert choose_chunk(slow)["chunk"] == 8 and "none reached" in choose_chunk(slow)["rule"]
    assert choose_chunk([row(0, 1, 1.0)]) is None


def test_chunk_specs_name_fixed_and_growing_streams() -> None:
    assert [Mode.parse("8").size(i) for i in range(3)] == [8, 8, 8]
    assert [Mode.parse("4x2").size(i) for i in range(4)] == [4, 8, 16, 32]
    assert (Mode.parse("4x2").name, Mode(0).name) == ("chunk 4x2", "unary")
    with pytest.raises(ValueError, match="positive"):
        Mode.parse("0")
