"""Quality signals: repetition ratio and emptiness."""

from __future__ import annotations

import pytest

from serving.gateway.signals import repetition_ratio, signals_for
from serving.gateway.upstream import Prediction


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0.0),
        ("one two three", 0.0),  # a single 3-gram: nothing to repeat
        ("the quick brown fox jumps over the lazy dog", 0.0),
        ("a b c a b c", 0.25),  # 4 trigrams, (a b c) repeats once
        ("La la la la la la", 0.75),  # case-folded: 4 trigrams, one distinct
    ],
)
def test_repetition_ratio(text: str, expected: float) -> None:
    assert repetition_ratio(text) == pytest.approx(expected)


def test_a_loop_scores_near_one_and_prose_near_zero() -> None:
    loop = "the cat sat. " * 30
    assert repetition_ratio(loop) > 0.9
    prose = "It was a bright cold day in April, and the clocks were striking thirteen."
    assert repetition_ratio(prose) == 0.0


def test_signals_for_uses_the_text_the_client_got() -> None:
    pred = Prediction("   ", 5, 3, "length", 2.5, 1)
    sig = signals_for(pred, pred.text)
    assert sig.empty and sig.output_tokens == 3 and sig.mean_nll == 2.5
    assert sig.truncated_prompt_tokens == 1
    assert not signals_for(pred, "words").empty
