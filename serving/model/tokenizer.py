"""In-graph byte tokenizer built from core TF string ops (no py_function: it serves in C++)."""

from __future__ import annotations

import tensorflow as tf

from serving.model.config import EOT_ID

# id -> the byte it stands for; the end-of-text id decodes to nothing.
_BYTE_TABLE = [bytes([i]) for i in range(256)] + [b""]


def sanitize_utf8(text: tf.Tensor) -> tf.Tensor:
    """Replace invalid UTF-8 sequences with U+FFFD instead of failing the request."""
    return tf.strings.unicode_transcode(
        text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )


def encode(prompts: tf.Tensor) -> tf.RaggedTensor:
    """[B] strings -> ragged [B, None] int32 byte ids of their (sanitised) UTF-8 bytes."""
    return encode_bytes(sanitize_utf8(prompts))


def encode_bytes(strings: tf.Tensor) -> tf.RaggedTensor:
    """[B] strings -> ragged [B, None] int32 byte ids of their bytes as they are (no sanitising)."""
    chars = tf.strings.bytes_split(strings)
    flat = tf.io.decode_raw(chars.flat_values, tf.uint8)
    ids = tf.cast(tf.reshape(flat, [-1]), tf.int32)
    return chars.with_flat_values(ids)


def decode(ids: tf.Tensor, lengths: tf.Tensor) -> tf.Tensor:
    """[B, T] ids and [B] lengths -> [B] valid UTF-8 strings (a split character is replaced)."""
    table = tf.constant(_BYTE_TABLE)
    pieces = tf.gather(table, ids)
    mask = tf.sequence_mask(lengths, tf.shape(ids)[1])
    pieces = tf.where(mask, pieces, tf.constant(b""))
    return sanitize_utf8(tf.strings.reduce_join(pieces, axis=1))


__all__ = ["EOT_ID", "decode", "encode", "encode_bytes", "sanitize_utf8"]
