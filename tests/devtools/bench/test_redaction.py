"""The redaction bench prints every figure on a tiny run."""

from __future__ import annotations

import argparse

import pytest

from devtools.bench import redaction
from devtools.dialogues import SEED_KINDS


def test_a_tiny_run_prints_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    redaction.add_arguments(parser)
    args = parser.parse_args(["--seeded", "120", "--clean", "60", "--repeats", "1"])
    assert redaction.main(args) == 0
    out = capsys.readouterr().out
    for kind in SEED_KINDS:
        assert any(line.split()[:1] == [kind] and "%" in line for line in out.splitlines()), kind
    assert "false positives:" in out and "of 60 clean dialogues" in out
    for name in ("dialogues", "clean_dialogues", "shape_corpus", "plain_prompts"):
        assert any(line.startswith(name) for line in out.splitlines()), name
    assert "targets met" in out


def test_json_has_every_kind_and_both_timings(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    parser = argparse.ArgumentParser()
    redaction.add_arguments(parser)
    redaction.main(parser.parse_args(["--seeded", "60", "--clean", "30", "--repeats", "1",
                                      "--json"]))  # fmt: skip
    result = json.loads(capsys.readouterr().out)
    assert set(result["kinds"]) == set(SEED_KINDS)
    assert all({"seeded", "found", "recall", "recall_before"} <= set(k) for k in
               result["kinds"].values())  # fmt: skip
    assert all({"before_us", "after_us"} == set(t) for t in result["timing"].values())
    assert 0.0 <= result["false_positives"]["rate"] <= 1.0
