"""An imported byte-level BPE tokenizer: keras_hub's ids for ordinary rows, linear cost for a
row with a very long word (serving/model/hub/bpe.py)."""

from __future__ import annotations

from typing import Any

import pytest
import tensorflow as tf

from serving.model.hub import bpe
from tests.support.hub import cached_gpt2_preset, cached_qwen_preset

# ordinary rows (prose, Chinese, code, odd whitespace, a special token) and rows that hold one
# word far longer than any word of text: what a client bug or an attacker sends
ORDINARY = [
    "The assert statement is a convenient way to insert debugging assertions.",
    "用户：你好，我3月5日买的手机有质量问题，想申请退款",
    "Hello  world\n\n  x = 12345;;; <|endoftext|>end\t\u3000全角 ok\u00a0nbsp",
    "",
    "It's we'll I'd   trailing   ",
]
LONG = [
    " " * 5000 + "x",
    "tokenpulse" * 300,
    "===" * 100 + "\n" + "客服" * 200,
    "\U0001f468\u200d\U0001f469\u200d\U0001f467" * 100,
]


@pytest.fixture(scope="module", params=["gpt2", "qwen"])
def tokenizer(request: pytest.FixtureRequest) -> Any:
    import keras_hub

    preset = cached_gpt2_preset() if request.param == "gpt2" else cached_qwen_preset()
    return keras_hub.models.CausalLM.from_preset(str(preset)).preprocessor.tokenizer


MIXED = [ORDINARY[0], LONG[0], *ORDINARY[1:], *LONG[1:]]  # long rows among ordinary ones


@pytest.fixture(scope="module")
def encoded(tokenizer: Any) -> tuple[list[list[int]], int, list[list[int]]]:
    """The guarded encoder's ids for MIXED, the most characters one string passed to keras_hub
    had, and keras_hub's own ids for ORDINARY alone (one traced call each)."""
    longest = tf.Variable(0, dtype=tf.int32)

    def spy(text: tf.Tensor) -> tf.RaggedTensor:
        chars = tf.strings.length(text, unit="UTF8_CHAR")
        longest.assign(tf.maximum(longest, tf.reduce_max(tf.concat([chars, [0]], 0))))
        return tf.cast(tokenizer(text), tf.int32)

    @tf.function
    def both(mixed: tf.Tensor, ordinary: tf.Tensor) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
        return bpe.guarded(spy, mixed, tokenizer), tf.cast(tokenizer(ordinary), tf.int32)

    got, alone = both(tf.constant(MIXED), tf.constant(ORDINARY))
    return got.to_list(), int(longest.numpy()), alone.to_list()


def test_ordinary_rows_get_keras_hubs_own_ids_whatever_they_are_batched_with(
    encoded: tuple[list[list[int]], int, list[list[int]]],
) -> None:
    got, _, alone = encoded
    assert [got[0], *got[2 : len(ORDINARY) + 1]] == alone


def test_a_long_word_reaches_keras_hub_only_in_short_pieces_and_spells_the_same_bytes(
    tokenizer: Any, encoded: tuple[list[list[int]], int, list[list[int]]]
) -> None:
    got, longest, _ = encoded
    # the ordinary rows went whole (the longest has 72 characters), the long ones in pieces
    assert longest == max(len(t) for t in ORDINARY) > bpe.MAX_WORD_CHARS
    vocab = bpe.vocab(_Preprocessor(tokenizer), tokenizer.vocabulary_size())
    long_rows = [got[1], *got[len(ORDINARY) + 1 :]]
    for text, ids in zip(LONG, long_rows, strict=True):
        assert b"".join(vocab.pieces[i] for i in ids) == text.encode()


class _Preprocessor:
    """What `bpe.vocab` reads of a preprocessor."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.add_start_token = False
