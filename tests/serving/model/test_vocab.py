"""The graph's end-of-text rule is the gateway's: a character cut short is dropped."""

from __future__ import annotations

import itertools

from tests.support.utf8 import all_tails
from tokenpulse.utf8 import partial_char_len


def test_the_graph_drops_what_the_gateway_drops() -> None:
    import tensorflow as tf

    from serving.model.vocab import drop_partial_char

    rows = [
        prefix + tail for prefix, tail in itertools.product((b"", b"x", "中".encode()), all_tails())
    ]
    kept = drop_partial_char(tf.constant(rows)).numpy()
    wrong = [r for r, k in zip(rows, kept, strict=True) if k != r[: len(r) - partial_char_len(r)]]
    assert wrong == []


def test_finished_text_drops_a_cut_character_and_replaces_invalid_bytes() -> None:
    import tensorflow as tf

    from serving.model.vocab import finished_text

    rows = [b"ok \xe4\xb8", b"ok \xe4\xb8\xad", b"ok \xff", b"ok \xc3a", b""]
    got = [t.decode() for t in finished_text(tf.constant(rows)).numpy()]
    assert got == ["ok ", "ok 中", "ok \ufffd", "ok \ufffda", ""]
