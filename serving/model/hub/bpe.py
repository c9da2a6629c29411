"""A keras_hub byte-level BPE tokenizer (`BytePairTokenizer`: GPT-2's, Qwen's) as a `Vocab`.

The tokenizer runs in the graph as keras_hub builds it (TF.Text's RegexSplitWithOffsets and
core TF ops); the table maps each id back to the bytes its printable stand-in characters mean.

keras_hub's merge loop takes a round per merge of the longest word, each round over every word,
so one word of L characters costs O(L^2): 16,000 spaces (one whitespace word) took 47.6 CPU-s
on the tests' GPT-2 import, and the gateway takes a 1 MiB body. A row with a word longer than
MAX_WORD_CHARS is therefore tokenized piecewise: its words (keras_hub's own split) cut into
pieces of at most MAX_WORD_CHARS characters, each piece tokenized alone, which costs O(length).
Every other row goes to keras_hub's tokenizer whole, so its ids are keras_hub's, whatever rows
it is batched with; a piecewise row's ids spell the same bytes, but need not be the ids keras_hub
would give (a piece is split again on its own, and a cut word merges only within its pieces).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from serving.model.hub.preset import PresetError
from serving.model.tokenizer import cut as tokenizer_cut
from serving.model.vocab import Vocab

MAX_WORD_CHARS = 64  # longer than any word of ordinary text; a piece's merges stay cheap


def _byte_decoder() -> dict[str, bytes]:
    """Byte-level BPE's printable stand-in character -> the byte it stands for."""
    from keras_hub.src.tokenizers.byte_pair_tokenizer import bytes_to_unicode

    byte_list, unicode_list = bytes_to_unicode()
    return {u: bytes(b) for b, u in zip(byte_list, unicode_list, strict=True)}


def vocab(preprocessor: Any, size: int) -> Vocab:
    """The preset tokenizer's ids as bytes (special tokens: none), `size` ids as the model has;
    a prompt starts with a start token where the preset's preprocessor adds one."""
    tokenizer = preprocessor.tokenizer
    if getattr(tokenizer, "add_prefix_space", False):
        # each piece of a long word would get a space of its own (see `guarded`)
        raise PresetError("a tokenizer with add_prefix_space is not importable yet")
    decoder = _byte_decoder()
    pieces = [b""] * size
    special = set(tokenizer.special_tokens)
    for token, index in tokenizer.vocabulary.items():
        if index < size and token not in special:
            pieces[index] = b"".join(decoder[c] for c in token)

    def encode(text: tf.Tensor) -> tf.RaggedTensor:
        return guarded(lambda t: tf.cast(tokenizer(t), tf.int32), text, tokenizer)

    eot = int(tokenizer.end_token_id)
    start = tokenizer.start_token_id if preprocessor.add_start_token else None
    if start is not None and int(start) != eot:
        raise PresetError(f"start token {start} is not end-of-text {eot}: not importable yet")
    return Vocab(tuple(pieces), eot, encode, False, tokenizer, starts=start is not None)


def guarded(tokenize: Any, text: tf.Tensor, tokenizer: Any) -> tf.RaggedTensor:
    """[B] strings -> ragged [B, None] ids: `tokenize` on every row whose words (keras_hub's
    split) all have at most MAX_WORD_CHARS characters, piece by piece on the others."""
    from keras_hub.src.tokenizers.byte_pair_tokenizer import split_strings_for_bpe

    words = split_strings_for_bpe(text, tokenizer.unsplittable_tokens)  # ragged [B, W]
    chars = tf.strings.unicode_split(words.flat_values, "UTF-8")  # ragged [N, C]
    longest = tf.reduce_max(words.with_flat_values(chars.row_lengths()), axis=1)
    long = longest > MAX_WORD_CHARS  # an empty row's max is the dtype's lowest: not long
    whole = tf.where(~long)[:, 0]
    pieced = tf.where(long)[:, 0]
    ids_whole = tokenize(tf.gather(text, whole))
    row_chars = tf.gather(words.with_flat_values(chars), pieced)  # ragged [L, W, C]
    pieces = tokenizer_cut(row_chars.values, MAX_WORD_CHARS)  # ragged [M, P, C]
    piece_ids = tokenize(tf.strings.reduce_join(pieces.values, axis=1))  # ragged [P, T]
    per_word = pieces.with_values(piece_ids).merge_dims(1, 2)  # ragged [M, T]
    ids_cut = row_chars.with_values(per_word).merge_dims(1, 2)  # ragged [L, T]
    order = tf.concat([whole, pieced], axis=0)
    both = tf.concat([ids_whole, ids_cut], axis=0)
    return tf.gather(both, tf.math.invert_permutation(order))
