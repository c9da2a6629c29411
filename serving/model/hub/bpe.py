"""A keras_hub byte-level BPE tokenizer (`BytePairTokenizer`: GPT-2's, Qwen's) as a `Vocab`.

The tokenizer runs in the graph as keras_hub builds it (TF.Text's RegexSplitWithOffsets and
core TF ops); the table maps each id back to the bytes its printable stand-in characters mean.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from serving.model.hub.preset import PresetError
from serving.model.vocab import Vocab


def _byte_decoder() -> dict[str, bytes]:
    """Byte-level BPE's printable stand-in character -> the byte it stands for."""
    from keras_hub.src.tokenizers.byte_pair_tokenizer import bytes_to_unicode

    byte_list, unicode_list = bytes_to_unicode()
    return {u: bytes(b) for b, u in zip(byte_list, unicode_list, strict=True)}


def vocab(preprocessor: Any, size: int) -> Vocab:
    """The preset tokenizer's ids as bytes (special tokens: none), `size` ids as the model has;
    a prompt starts with a start token where the preset's preprocessor adds one."""
    tokenizer = preprocessor.tokenizer
    decoder = _byte_decoder()
    pieces = [b""] * size
    special = set(tokenizer.special_tokens)
    for token, index in tokenizer.vocabulary.items():
        if index < size and token not in special:
            pieces[index] = b"".join(decoder[c] for c in token)

    def encode(text: tf.Tensor) -> tf.RaggedTensor:
        return tf.cast(tokenizer(text), tf.int32)

    eot = int(tokenizer.end_token_id)
    start = tokenizer.start_token_id if preprocessor.add_start_token else None
    if start is not None and int(start) != eot:
        raise PresetError(f"start token {start} is not end-of-text {eot}: not importable yet")
    return Vocab(tuple(pieces), eot, encode, False, tokenizer, starts=start is not None)
