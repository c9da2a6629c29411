"""`tokenpulse bench continuation` runs end to end on the tiny model (figures only)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.bench.continuation import TARGET_RATIO, TTFT_TARGET, Mode, choose_chunk


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


def row(chunk: int, conc: int, tput: float, first: float, growth: int = 1) -> dict:
    name = "unary" if not chunk else f"chunk {chunk}" + (f"x{growth}" if growth > 1 else "")
    return {"mode": name, "chunk": chunk, "growth": growth, "concurrency": conc,
            "tokens_per_s_vs_unary": tput, "first_p50_vs_unary": first}  # fmt: skip


def level(conc: int, *modes: tuple[int, float, float]) -> list[dict]:
    return [row(0, conc, 1.0, 1.0)] + [row(k, conc, tput, first) for k, tput, first in modes]


def test_the_rule_takes_the_smallest_chunk_meeting_both_targets() -> None:
    ok = TARGET_RATIO + 0.01
    rows = level(1, (4, 0.5, 0.1), (8, 0.7, 0.2), (16, 0.9, 0.25))
    rows += level(32, (4, 0.4, 0.3), (8, ok, 0.5), (16, 0.95, 0.6))  # first tokens: c=1 counts
    assert choose_chunk(rows)["mode"] == "chunk 8"


def test_without_a_winner_the_rule_weighs_both_shortfalls_alike() -> None:
    # chunk 8 meets the first-token target but loses half the throughput; 32 the reverse
    rows = level(1, (8, 0.5, 0.2), (16, 0.7, 0.33), (32, 0.9, 0.6))
    rows += level(8, (8, 0.5, 0.3), (16, 0.7, 0.4), (32, 0.9, 0.6))
    rows += level(32, (8, 0.45, 0.3), (16, 0.7, 0.4), (32, 1.0, 0.6))
    chosen = choose_chunk(rows)
    assert chosen["mode"] == "chunk 16"
    assert (chosen["concurrency"], chosen["first_concurrency"]) == (32, 1)
    assert chosen["shortfall"] == pytest.approx(max(0.1 / 0.8, 0.03 / TTFT_TARGET), abs=1e-3)
    assert choose_chunk(level(1)) is None


def test_chunk_specs_name_fixed_and_growing_streams() -> None:
    assert [Mode.parse("8").size(i) for i in range(3)] == [8, 8, 8]
    assert [Mode.parse("4x2").size(i) for i in range(4)] == [4, 8, 16, 32]
    assert (Mode.parse("4x2").name, Mode(0).name) == ("chunk 4x2", "unary")
    with pytest.raises(ValueError, match="positive"):
        Mode.parse("0")
