"""The in-graph byte tokenizer."""

from __future__ import annotations

import tensorflow as tf

from serving.model import tokenizer


def test_encode_gives_utf8_bytes_per_row() -> None:
    ids = tokenizer.encode(tf.constant(["hé", "", "ab"]))
    assert ids.to_list() == [[104, 0xC3, 0xA9], [], [97, 98]]


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    ids = tokenizer.encode(tf.constant([b"a\xffb"]))
    assert ids.to_list() == [[97, 0xEF, 0xBF, 0xBD, 98]]  # U+FFFD in UTF-8


def test_decode_respects_lengths_and_sanitises_split_characters() -> None:
    ids = tf.constant([[104, 0xC3, 0xA9, 0], [0xC3, 97, 0, 0]])
    text = tokenizer.decode(ids, tf.constant([3, 2]))
    assert [t.decode() for t in text.numpy()] == ["hé", "\ufffda"]


def test_end_of_text_decodes_to_nothing() -> None:
    text = tokenizer.decode(tf.constant([[97, tokenizer.EOT_ID, 98]]), tf.constant([3]))
    assert text.numpy()[0] == b"ab"
