"""Quality signals computed per output: emptiness and the share of repeated n-grams."""

from __future__ import annotations

import re

from serving.gateway.upstream import Prediction
from tokenpulse.samples import OutputSignals

_WORDS = re.compile(r"\w+|[^\w\s]", re.UNICODE)
REPETITION_N = 3


def repetition_ratio(text: str, n: int = REPETITION_N) -> float:
    """Share of word n-grams that repeat an earlier one (0: none repeat; near 1: a loop).

    Words and punctuation marks are the units, so "the cat. the cat. the cat." scores high. Text
    with fewer than n + 1 units has no repetition to measure and scores 0.
    """
    units = _WORDS.findall(text.lower())
    total = len(units) - n + 1
    if total < 2:
        return 0.0
    distinct = len({tuple(units[i : i + n]) for i in range(total)})
    return (total - distinct) / total


def signals_for(prediction: Prediction, text: str) -> OutputSignals:
    """Signals of one output (`text` is what the client got, after stop sequences)."""
    return OutputSignals(
        prompt_tokens=prediction.prompt_tokens,
        output_tokens=prediction.output_tokens,
        finish_reason=prediction.finish_reason,
        empty=not text.strip(),
        repetition_ratio=repetition_ratio(text),
        mean_nll=prediction.mean_nll,
        truncated_prompt_tokens=prediction.truncated_prompt_tokens,
    )
