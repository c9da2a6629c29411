"""An imported byte-level BPE tokenizer on our merge encoder: keras_hub's ids on ordinary text,
linear cost for a very long word, and no state kept between calls (serving/model/hub/bpe.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from serving.model import data, dialogues
from serving.model.bpe import MAX_WORD_BYTES
from tests.support.hub import (
    cached_gpt2_import,
    cached_qwen_import,
)
from tokenpulse.tfserving.ops import saved_model_ops

# Written from what prompts hold, not from the split pattern: prose, Chinese chat, code, odd
# whitespace and Unicode, contractions, special-token text, empty and blank rows
ORDINARY = [
    "The assert statement is a convenient way to insert debugging assertions.",
    "用户：你好，我3月5日买的手机有质量问题，想申请退款<|endoftext|>客服：您好，很抱歉！",
    "Hello  world\n\n  x = 12345;;; <|endoftext|>end\t\u3000全角 ok\u00a0nbsp",
    "",
    " ",
    "It's we'll I'd   trailing   ",
    "def f(x):\n    return x ** 2  # squared\n\n\n",
    "emoji 😀😀 and ＵＮＩＣＯＤＥ ①②③ digits ٣٤٥ x\u2028y",
    "<|endoftext|><|endoftext|>  <|endoftext|>",
]
# one word far longer than any word of text: what a client bug or an attacker sends
LONG = [
    " " * 5000 + "x",
    "tokenpulse" * 300,
    "===" * 100 + "\n" + "客服" * 200,
    "\U0001f468\u200d\U0001f469\u200d\U0001f467" * 100,
]


@pytest.fixture(scope="module", params=["gpt2", "qwen"])
def family(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def tokenizer(family: str, hub_lm: Callable[[str], Any]) -> Any:
    return hub_lm(family).preprocessor.tokenizer


def _texts() -> list[str]:
    return ORDINARY + data.documents(8_000) + dialogues.dialogues(4_000, 3)


def test_ordinary_text_gets_keras_hubs_own_ids(tokenizer: Any) -> None:
    import tensorflow as tf

    from serving.model.hub import bpe

    texts = _texts()
    encoder = bpe.encoder_of(tokenizer, tokenizer.vocabulary_size())
    ours = tf.function(encoder)(tf.constant(texts)).to_list()
    theirs = tf.function(lambda t: tf.cast(tokenizer(t), tf.int32))(tf.constant(texts))
    assert ours == theirs.to_list()
    assert len(texts) > 15 and sum(map(len, ours)) > 2000


def test_a_long_word_costs_pieces_of_the_cut_and_spells_the_same_bytes(
    tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tensorflow as tf

    from serving.model.hub import bpe

    vocab = bpe.vocab(_Preprocessor(tokenizer), tokenizer.vocabulary_size())
    encoder = vocab.module
    widths: list[int] = []
    real = encoder.merge
    monkeypatch.setattr(encoder, "merge", lambda ids: widths.append(ids.shape[1]) or real(ids))
    got = tf.function(vocab.encode)(tf.constant(LONG)).to_list()
    assert widths == [MAX_WORD_BYTES + 2]  # traced once: every piece within the cut
    for text, ids in zip(LONG, got, strict=True):
        assert b"".join(vocab.pieces[i] for i in ids) == text.encode()


def test_the_import_keeps_no_tokenizer_cache(family: str) -> None:
    export = cached_gpt2_import() if family == "gpt2" else cached_qwen_import()
    ops = saved_model_ops(export)
    assert "RegexSplitWithOffsets" in ops  # keras_hub's split, in the graph
    assert not {op for op in ops if "MutableHashTable" in op}


class _Preprocessor:
    """What `bpe.vocab` reads of a preprocessor."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.add_start_token = False
