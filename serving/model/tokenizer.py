"""In-graph tokenizers from core TF ops and TF.Text's (no py_function: they serve in C++).

`bpe_vocab`: our model's subword vocabulary (`bpe.py`). A prompt is cut at special-token text,
then into words by the split pattern, both with TF.Text's `RegexSplitWithOffsets` op (RE2,
which stock `tensorflow_model_server` links in:
tokenpulse/tfserving/ops.py), keeping each match as a word, which is what the `tokenizers`
package's "isolated" split does. Each word becomes its byte ids, cut into pieces of at most
`MAX_WORD_BYTES` (so that merging costs O(bytes), however long a word), and the merges are
applied in the graph with core ops, all pieces at once: each round merges, in every piece, the
adjacent pair of lowest rank (the leftmost of equals), until no pair has one. That is the order the
`tokenizers` package merges in, so the ids equal what training read (a test compares them).
Detokenizing is core ops (each id's bytes, `vocab.py`). `byte_vocab`: every id one byte, plus
end-of-text (the decoding tests' vocabulary).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import tensorflow as tf

from serving.model.bpe import MAX_WORD_BYTES, N_BYTES, SPLIT_PATTERN, BpeError, BpeSpec
from serving.model.vocab import Vocab, encode_bytes, finished_text, sanitize_utf8
from tokenpulse.chatformat import SPECIAL_TOKENS
from tokenpulse.tfserving.ops import tf_text_library

BYTE_EOT_ID = N_BYTES  # the byte vocabulary's end-of-text
_SPECIAL_PATTERN = "(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")"
_WORD_PATTERN = f"{_SPECIAL_PATTERN}|{SPLIT_PATTERN}"


def byte_vocab(size: int = N_BYTES + 1) -> Vocab:
    """Ids 0-255 are bytes, 256 end-of-text, any further ids nothing (a model of `size` ids)."""
    return Vocab(
        pieces=tuple(bytes([i]) for i in range(N_BYTES)) + (b"",) * (size - N_BYTES),
        eot_id=BYTE_EOT_ID,
        encode=encode_bytes,
        resumable=True,
    )


def regex_split(text: tf.Tensor, pattern: str) -> tf.RaggedTensor:
    """[N] strings -> ragged [N, None]: the text cut at every match of `pattern` (RE2), each
    match kept as a piece, as TF.Text's `regex_split(text, pattern, pattern)` cuts it. The op is
    called from its kernel library (what the server links), not through the `tensorflow_text`
    package, which would import Keras too."""
    wrapped = f"({pattern})"  # a group around each pattern, as TF.Text's wrapper passes them
    ops = tf_text_library("_regex_split_ops.so")
    tokens, _, _, splits = ops.regex_split_with_offsets(tf.reshape(text, [-1]), wrapped, wrapped)
    return tf.RaggedTensor.from_row_splits(tokens, splits)


class MergeEncoder(tf.Module):
    """[B] valid UTF-8 strings -> ragged [B, None] int32 ids of a byte-level BPE (tables saved).

    `merges`: (left id, right id) -> (rank, merged id), as keys `left * size + right` and values
    `rank * size + merged id`; `byte_ids`: each byte's id before any merge (None: the byte's
    value); `specials`: text -> id of the words that are one id whole (at most MAX_WORD_BYTES
    each); `split`: [B] strings -> ragged [B, None] words, each special token's text one word.
    The encoder keeps no state between calls."""

    def __init__(
        self,
        size: int,
        merges: tuple[list[int], list[int]],
        specials: dict[str, int],
        split: Callable[[tf.Tensor], tf.RaggedTensor],
        byte_ids: list[int] | None = None,
    ) -> None:
        super().__init__(name="bpe")
        too_long = [t for t in specials if len(t.encode()) > MAX_WORD_BYTES]
        if too_long:
            raise BpeError(f"special tokens longer than {MAX_WORD_BYTES} bytes: {too_long}")
        self.size = size
        keys, values = merges
        self.merges = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys, tf.int64), tf.constant(values, tf.int64)
            ),
            default_value=-1,
        )
        self.special_text = tf.constant(list(specials), tf.string)
        self.special_ids = tf.constant(list(specials.values()), tf.int32)
        self.byte_ids = None if byte_ids is None else tf.constant(byte_ids, tf.int32)
        self._split = split

    def words(self, text: tf.Tensor) -> tf.RaggedTensor:
        """[B] strings -> ragged [B, None] words (special-token text is one word). TF.Text's
        regex split, which every split here runs on, stops reading a string at its first NUL
        byte ("a\\x00bc d" splits to ["a"]), so the rest of a prompt would be lost: a NUL is
        read as U+FFFD, as invalid UTF-8 is (`sanitize_utf8`)."""
        return self._split(tf.strings.regex_replace(text, "\\x00", "\ufffd"))

    def merge(self, ids: tf.Tensor) -> tf.Tensor:
        """[N, L] ids (-1 after a word's end) -> the same with every merge applied, left-aligned."""
        size = tf.constant(self.size, tf.int64)
        width = tf.shape(ids)[1]
        cols = tf.range(width)[None, :]

        def round_(ids: tf.Tensor, _: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            left, right = tf.cast(ids[:, :-1], tf.int64), tf.cast(ids[:, 1:], tf.int64)
            found = self.merges.lookup(left * size + right)
            found = tf.where((left >= 0) & (right >= 0), found, -1)
            rank = tf.where(found >= 0, found // size, tf.int64.max)
            at = tf.argmin(rank, axis=1, output_type=tf.int32)  # the first of the lowest
            some = tf.reduce_min(rank, axis=1) < tf.int64.max
            merged = tf.cast(tf.gather(found, at, batch_dims=1) % size, tf.int32)
            at = tf.where(some, at, width)[:, None]
            source = cols + tf.cast(cols > at, tf.int32)  # drop the right half of the pair
            shifted = tf.gather(ids, tf.minimum(source, width - 1), batch_dims=1)
            shifted = tf.where(source >= width, -1, shifted)
            return tf.where(cols == at, merged[:, None], shifted), tf.reduce_any(some)

        def go(ids: tf.Tensor, more: tf.Tensor) -> tf.Tensor:
            return more

        out, _ = tf.while_loop(
            go, round_, (ids, tf.constant(True)), maximum_iterations=tf.maximum(width - 1, 0)
        )
        return out

    def __call__(self, text: tf.Tensor) -> tf.RaggedTensor:
        words = self.words(text)
        flat, where = tf.unique(words.flat_values)  # a word merges once however often it occurs
        is_special = flat[:, None] == self.special_text[None, :]  # [N, S]
        special_id = tf.reduce_sum(tf.where(is_special, self.special_ids[None, :], 0), axis=1)
        pieces = cut(encode_bytes(flat), MAX_WORD_BYTES)  # a special token's text is one piece
        if self.byte_ids is not None:
            pieces = pieces.with_flat_values(tf.gather(self.byte_ids, pieces.flat_values))
        owner = pieces.value_rowids()
        # two spare columns: every piece has a pair to look at, even an empty batch
        ids = pieces.values.to_tensor(default_value=-1, shape=[None, MAX_WORD_BYTES + 2])
        first = tf.range(MAX_WORD_BYTES + 2)[None, :] == 0
        ids = tf.where(
            tf.gather(tf.reduce_any(is_special, axis=1), owner)[:, None],
            tf.where(first, tf.gather(special_id, owner)[:, None], -1),
            ids,
        )
        merged = tf.RaggedTensor.from_tensor(self.merge(ids), padding=-1)
        tokens = tf.gather(pieces.with_values(merged).merge_dims(1, 2), where)
        return words.with_flat_values(tokens).merge_dims(1, 2)


def _words(text: tf.Tensor) -> tf.RaggedTensor:
    """Our split: [B] strings -> ragged [B, None] words (special-token text is one word).

    Special-token text is cut out first: in one pass, a space before it would start a
    punctuation word (" <|") and break it. A segment is then all special token, which the
    first alternative keeps whole, or holds none."""
    segments = regex_split(text, _SPECIAL_PATTERN)
    words = regex_split(segments.flat_values, _WORD_PATTERN)
    return segments.with_flat_values(words).merge_dims(1, 2)


class BpeEncoder(MergeEncoder):
    """Our vocabulary's encoder: ids 0-255 are the bytes, the special tokens the last ids."""

    def __init__(self, spec: BpeSpec) -> None:
        specials = dict(zip(SPECIAL_TOKENS, spec.special_ids, strict=True))
        super().__init__(spec.vocab_size, spec.merge_table(), specials, _words)


def cut(ids: tf.RaggedTensor, width: int) -> tf.RaggedTensor:
    """Ragged [N, None] -> ragged [N, None, None]: each row cut, in order, into pieces of
    `width` items, the last piece the rest (what `bpe.py`'s training encoder cuts)."""
    lengths = ids.row_lengths()
    count = (lengths + width - 1) // width
    index = tf.ragged.range(count).flat_values
    sizes = tf.minimum(tf.repeat(lengths, count) - index * width, width)
    return tf.RaggedTensor.from_nested_row_lengths(ids.flat_values, [count, sizes])


def bpe_vocab(spec: BpeSpec) -> Vocab:
    """Our model's vocabulary: the spec's pieces, end-of-text and end-of-turn ending a row."""
    encoder = BpeEncoder(spec)
    eot, eot_turn = spec.special_ids
    return Vocab(spec.pieces(), eot, encoder, False, encoder, also_end=(eot_turn,))


def decode(vocab: Vocab, ids: tf.Tensor, lengths: tf.Tensor) -> tf.Tensor:
    """[B, T] ids and [B] lengths -> [B] valid UTF-8 strings (invalid bytes replaced, a last
    character cut short dropped: `finished_text`)."""
    return finished_text(vocab.join(ids, tf.sequence_mask(lengths, tf.shape(ids)[1])))


SPEC_KEY = "tokenizer/spec/.ATTRIBUTES/VARIABLE_VALUE"  # where a checkpoint keeps it


class SavedSpec(tf.Module):
    """A vocabulary as a checkpoint variable (`tokenizer=` in the checkpoint): it travels with
    the weights it was trained with, to export and to a resumed run."""

    def __init__(self, spec: BpeSpec) -> None:
        super().__init__(name="tokenizer")
        self.spec = tf.Variable(spec.to_json(), trainable=False, name="spec")


def read_spec(prefix: str) -> BpeSpec | None:
    """The vocabulary a checkpoint carries; None when it carries none."""
    reader = tf.train.load_checkpoint(prefix)
    if not reader.has_tensor(SPEC_KEY):
        return None
    return BpeSpec.from_json(reader.get_tensor(SPEC_KEY).decode())


__all__ = [
    "BYTE_EOT_ID",
    "BpeEncoder",
    "MergeEncoder",
    "SavedSpec",
    "bpe_vocab",
    "byte_vocab",
    "decode",
    "read_spec",
    "sanitize_utf8",
]
