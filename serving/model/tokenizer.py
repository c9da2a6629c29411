"""In-graph byte tokenizer built from core TF string ops (no py_function: it serves in C++)."""

from __future__ import annotations

import tensorflow as tf

from serving.model.config import EOT_ID, VOCAB_SIZE
from serving.model.vocab import Vocab, encode_bytes, sanitize_utf8


def encode(prompts: tf.Tensor) -> tf.RaggedTensor:
    """[B] strings -> ragged [B, None] int32 byte ids of their (sanitised) UTF-8 bytes."""
    return encode_bytes(sanitize_utf8(prompts))


# id -> the byte it stands for; the end-of-text id decodes to nothing.
BYTES = Vocab(
    pieces=tuple(bytes([i]) for i in range(256)) + (b"",) * (VOCAB_SIZE - 256),
    eot_id=EOT_ID,
    encode=encode_bytes,
    resumable=True,
)


def decode(ids: tf.Tensor, lengths: tf.Tensor) -> tf.Tensor:
    """[B, T] ids and [B] lengths -> [B] valid UTF-8 strings (a split character is replaced)."""
    return sanitize_utf8(BYTES.join(ids, tf.sequence_mask(lengths, tf.shape(ids)[1])))


__all__ = ["BYTES", "EOT_ID", "decode", "encode", "encode_bytes", "sanitize_utf8"]
