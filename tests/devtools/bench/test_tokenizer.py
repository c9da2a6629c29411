"""`tokenpulse bench tokenizer` runs on the tiny vocabulary (figures only, no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from devtools.bench.tokenizer import QUICK_SIZES, WORDS, inputs


@pytest.mark.slow  # the bench end to end: `make test`, not the inner loop
def test_quick_run_reports_every_input_at_every_size_with_the_training_encoders_ids() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "tokenizer", "--quick", "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tokenizing 6 inputs of 20000 bytes" in done.stderr  # progress goes to stderr
    doc = json.loads(done.stdout)
    assert doc["preset"] == "tiny" and doc["sizes"] == list(QUICK_SIZES)
    kinds = {"ordinary", *WORDS}
    for size in QUICK_SIZES:
        rows = doc["results"][str(size)]
        assert set(rows) == kinds
        for row in rows.values():
            assert row["same_as_training_encoder"] and row["tokens"] > 0 and row["cpu_s"] >= 0
            assert 0.99 * size <= row["bytes"] <= size
        assert rows["ordinary"]["vs_ordinary"] == 1.0
    assert set(doc["growth"]["cpu_ratio"]) == kinds and doc["differ"] == 0


def test_every_long_input_is_one_word_of_its_unit() -> None:
    texts = inputs(1000, "Some ordinary text. ")
    assert texts["ordinary"].startswith("Some ordinary") and len(texts["ordinary"]) == 1000
    assert 996 <= len(inputs(1000, "中文 text ")["ordinary"].encode()) <= 1000
    for name, unit in WORDS.items():
        assert texts[name] == unit * (1000 // len(unit.encode()))
