"""A model's tokens as the decoding graph sees them: each id's bytes, end-of-text, the encoder.

The loop, sampling and stop sequences are written once for every model; what differs between
our byte model and an imported one (a BPE vocabulary) is only this table. A token stands for 0
(end-of-text, other special tokens) to `max_bytes` bytes; the text of a row is its tokens'
bytes joined, and a stop sequence is matched on those bytes, wherever a token boundary falls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import tensorflow as tf

NO_ID = -1  # past a token's last byte in `TokenBytes.ids`


def sanitize_utf8(text: tf.Tensor) -> tf.Tensor:
    """Replace invalid UTF-8 sequences with U+FFFD instead of failing the request."""
    return tf.strings.unicode_transcode(
        text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )


def encode_bytes(strings: tf.Tensor) -> tf.RaggedTensor:
    """[B] strings -> ragged [B, None] int32 byte ids of their bytes as they are (no sanitising)."""
    chars = tf.strings.bytes_split(strings)
    flat = tf.io.decode_raw(chars.flat_values, tf.uint8)
    ids = tf.cast(tf.reshape(flat, [-1]), tf.int32)
    return chars.with_flat_values(ids)


class TokenBytes(NamedTuple):
    """Each token's bytes as ids: `ids` [V, M] left-aligned (NO_ID after), `lengths` [V]."""

    ids: tf.Tensor
    lengths: tf.Tensor


@dataclass(frozen=True)
class Vocab:
    """What the decoding graph needs to know about a model's tokens.

    `encode`: [B] valid UTF-8 strings -> ragged [B, None] int32 ids (no beginning-of-text).
    `resumable`: every token is one byte, so the bytes a row generated are its tokens and
    `continue` resumes by feeding them back; otherwise it resumes from the ids the caller sends
    back (the same bytes can be several token sequences, and only one is what the model chose).
    `module`: a trackable that holds the encoder's state (lookup tables), saved with the model.
    `starts`: every prompt starts with end-of-text as beginning-of-text (our model's way, and
    GPT-2's preprocessor's); otherwise a prompt is read as it is (Qwen's preprocessor adds no
    start token), and only a blank one gets end-of-text, since a row needs a token to read.
    `also_end`: ids besides end-of-text that end a row as it does (our end-of-turn).
    """

    pieces: tuple[bytes, ...]
    eot_id: int
    encode: Callable[[tf.Tensor], tf.RaggedTensor]
    resumable: bool
    module: Any = None
    starts: bool = True
    also_end: tuple[int, ...] = ()

    @property
    def end_ids(self) -> tuple[int, ...]:
        """Every id that ends a row (finish reason stop), end-of-text first."""
        return (self.eot_id, *self.also_end)

    def is_end(self, tokens: tf.Tensor) -> tf.Tensor:
        """[B] ids -> [B] whether each ends its row."""
        ends = tf.constant(list(self.end_ids), tf.int32)
        return tf.reduce_any(tokens[:, None] == ends[None, :], axis=1)

    @property
    def size(self) -> int:
        """V: how many ids the model scores."""
        return len(self.pieces)

    @property
    def max_bytes(self) -> int:
        """M: the most bytes one token stands for (at least 1)."""
        return max(1, *(len(p) for p in self.pieces))

    def piece_table(self) -> tf.Tensor:
        """[V] strings: each id's bytes."""
        return tf.constant(list(self.pieces), tf.string)

    def token_bytes(self) -> TokenBytes:
        """Each id's bytes as a [V, M] id table (built in the graph from the [V] strings)."""
        ragged = encode_bytes(self.piece_table())
        ids = ragged.to_tensor(default_value=NO_ID, shape=[self.size, self.max_bytes])
        return TokenBytes(ids, tf.cast(ragged.row_lengths(), tf.int32))

    def join(self, tokens: tf.Tensor, counted: tf.Tensor) -> tf.Tensor:
        """[B, T] ids and [B, T] bools -> [B] strings: the counted tokens' bytes, in order."""
        pieces = tf.gather(self.piece_table(), tf.maximum(tokens, 0))
        return tf.strings.reduce_join(tf.where(counted, pieces, tf.constant(b"")), axis=1)

    def text(self, tokens: tf.Tensor, cut: tf.Tensor) -> tf.Tensor:
        """[B, T] ids (negative: none) and [B] bytes to drop from the end -> [B] valid UTF-8."""
        joined = self.join(tokens, tokens >= 0)
        kept = tf.maximum(tf.strings.length(joined) - cut, 0)
        return sanitize_utf8(tf.strings.substr(joined, tf.zeros_like(kept), kept))
