"""Redaction meets its targets on the independent corpus: recall >= 99 % for every kind, and
false positives on at most 0.5 % of clean dialogues (a seed the bench does not use)."""

from __future__ import annotations

from devtools.bench.redaction import FP_TARGET, RECALL_TARGET, score
from devtools.dialogues import SEED_KINDS, clean_dialogues, seeded_dialogues
from log_pipeline.redaction.text import redact


def test_recall_and_false_positives_on_the_dialogue_corpus() -> None:
    seeded, clean = seeded_dialogues(seed=2026, size=3000), clean_dialogues(seed=2027, size=2000)
    result = score(redact, seeded, clean)
    for kind in SEED_KINDS:
        assert result.seeded[kind] >= 150, kind  # every kind is planted often enough to measure
        assert result.recall(kind) >= RECALL_TARGET, (kind, result.missed.get(kind, [])[:5])
    assert result.fp_rate <= FP_TARGET, result.fp_examples[:5]


def test_seeded_spans_hold_their_values() -> None:
    for dialogue in seeded_dialogues(seed=1, size=300):
        assert dialogue.seeded
        for planted in dialogue.seeded:
            assert dialogue.text[planted.start : planted.end] == planted.value.text
            assert all(part in dialogue.text for part in planted.value.vanishing())
