"""A keras_hub byte-level BPE tokenizer (`BytePairTokenizer`: GPT-2's, Qwen's) as a `Vocab`.

The prompt is split into words by keras_hub's own split (`split_strings_for_bpe`: TF.Text's
RegexSplitWithOffsets and core ops, in the graph), and the preset's merges run on our merge
encoder (`serving/model/tokenizer.py`'s `MergeEncoder`), in keras_hub's order: in each word the
adjacent pair of lowest rank, the leftmost of equals, until none is left. The table maps each id
back to the bytes its printable stand-in characters mean.

Not keras_hub's own merge loop, for two reasons:
- it keeps a cache of every word it has merged, a `MutableHashTable` in the exported graph, which
  a served model would fill with every distinct word it is sent, without bound; ours keeps none;
- it merges a word in rounds over every word, padded to the longest, so one word of L characters
  costs O(L^2): 16,000 spaces (one whitespace word) took 47.6 CPU-s on the tests' GPT-2 import,
  and the gateway passes prompts of 16,384 characters (the model server, bodies of 16 MiB). Ours
  cuts words into pieces of `MAX_WORD_BYTES` (64) bytes first, as our own vocabulary does, so a
  prompt costs O(bytes).
A prompt whose words all have at most 64 bytes gets keras_hub's ids (a test compares them on
prose, Chinese, code and odd whitespace); a longer word merges only within its pieces.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from serving.model.bpe import N_BYTES
from serving.model.hub.preset import PresetError
from serving.model.tokenizer import MergeEncoder
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
    encoder = encoder_of(tokenizer, size)
    eot = int(tokenizer.end_token_id)
    start = tokenizer.start_token_id if preprocessor.add_start_token else None
    if start is not None and int(start) != eot:
        raise PresetError(f"start token {start} is not end-of-text {eot}: not importable yet")
    return Vocab(tuple(pieces), eot, encoder, False, encoder, starts=start is not None)


def encoder_of(tokenizer: Any, size: int) -> MergeEncoder:
    """The preset tokenizer's vocabulary and merges on our merge encoder, split as keras_hub
    splits; a merge, byte or special token the vocabulary (of `size` ids) lacks is refused."""
    from keras_hub.src.tokenizers.byte_pair_tokenizer import (
        bytes_to_unicode,
        split_strings_for_bpe,
    )

    vocabulary: dict[str, int] = {t: int(i) for t, i in tokenizer.vocabulary.items()}
    byte_list, unicode_list = bytes_to_unicode()
    char_of = {b[0]: u for b, u in zip(byte_list, unicode_list, strict=True)}  # byte -> char
    missing = [b for b in range(N_BYTES) if vocabulary.get(char_of[b], size) >= size]
    if missing:
        raise PresetError(f"the vocabulary lacks the byte-level tokens of bytes {missing[:8]}")
    table: dict[int, int] = {}
    for rank, merge in enumerate(tokenizer.merges):
        left, right = merge.split(" ") if isinstance(merge, str) else merge
        ids = [vocabulary.get(t, size) for t in (left, right, left + right)]
        if max(ids) >= size:
            raise PresetError(f"merge {rank} ({left!r} {right!r}) is not in the vocabulary")
        table.setdefault(ids[0] * size + ids[1], rank * size + ids[2])
    specials = {t: vocabulary.get(t, size) for t in tokenizer.unsplittable_tokens}
    if any(i >= size for i in specials.values()):
        raise PresetError(f"special tokens missing from the vocabulary: {sorted(specials)}")
    unsplittable = list(tokenizer.unsplittable_tokens)
    prefix = bool(getattr(tokenizer, "add_prefix_space", False))

    def split(text: tf.Tensor) -> tf.RaggedTensor:
        if prefix:  # as keras_hub's tokenizer does before it splits
            text = tf.strings.join([" ", text])
        return split_strings_for_bpe(text, unsplittable)

    return MergeEncoder(
        size,
        (list(table), list(table.values())),
        specials,
        split,
        byte_ids=[vocabulary[char_of[b]] for b in range(N_BYTES)],
    )
