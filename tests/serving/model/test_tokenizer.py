"""The in-graph tokenizers: our BPE (equal to what training reads) and the byte vocabulary."""

from __future__ import annotations

from functools import cache

import pytest

from serving.model import bpe, data
from tokenpulse import chatformat

TEXTS = [
    "The assert statement is a convenient way to insert debugging assertions.",
    "用户：你好，我3月5日买的手机有质量问题，想申请退款<|endofturn|>\n客服：您好，很抱歉！",
    "Hello  world<|endofturn|>\n  x = 12345;;; <|endoftext|>end\t\u3000全角 ok\u00a0nbsp",
    "",
    "a",
    "<|endofturn|><|endoftext|>",
    "emoji 😀😀 and ＵＮＩＣＯＤＥ ①②③ digits ٣٤٥",
]


@cache
def _spec() -> bpe.BpeSpec:
    docs = data.documents(30_000) + [chatformat.render([("User", TEXTS[1])] * 20, answer=False)]
    return bpe.train(docs, 400)


def test_graph_ids_equal_the_training_encoder_ids() -> None:
    import tensorflow as tf

    from serving.model import tokenizer

    spec = _spec()
    assert len(spec.merges) > 50  # merges were learnt, Chinese ones among them
    assert any(len(p) == 3 and p[0] >= 0xE0 for p in spec.merged)
    vocab = tokenizer.bpe_vocab(spec)
    got = vocab.encode(tf.constant(TEXTS)).to_list()
    assert got == [ids.tolist() for ids in bpe.Encoder(spec).encode(TEXTS)]
    assert b"".join(vocab.pieces[i] for i in got[0]).decode() == TEXTS[0]
    assert len(got[0]) < 0.6 * len(TEXTS[0].encode())  # subwords, not bytes


# Written from what production prompts hold, not from the split pattern: pasted logs and code
# with long indentation or dividers, a model of text with no spaces (CJK, a base64 blob, a URL),
# emoji sequences, and a megabyte of whitespace from a client bug or an attacker.
LONG_WORDS = [
    " " * 5000,
    "\n" * 700 + "\t" * 300 + "\r\n" * 200,
    "=" * 333 + "-" * 129 + "#" * 64,
    "客服您好我想查询一下我上个月在贵店购买的那台洗衣机的物流信息为什么一直没有更新" * 20,
    "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0NTY3ODk" * 9,
    "https://example.com/" + "a1b2c3d4" * 40 + "?q=" + "%E4%BD%A0" * 30,
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466" * 300,
    "word " * 200 + "  " * 100 + "<|endofturn|>" + "\u3000" * 129,
]


def test_long_words_give_the_training_encoders_ids() -> None:
    import tensorflow as tf

    from serving.model import tokenizer

    spec = _spec()
    got = tokenizer.bpe_vocab(spec).encode(tf.constant(LONG_WORDS)).to_list()
    assert got == [ids.tolist() for ids in bpe.Encoder(spec).encode(LONG_WORDS)]
    pieces = tokenizer.bpe_vocab(spec).pieces
    assert [b"".join(pieces[i] for i in ids).decode() for ids in got[:-1]] == LONG_WORDS[:-1]


def test_merges_never_see_a_piece_longer_than_the_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """Merging costs up to a round per byte of the longest piece, each round over every piece:
    cut, a megabyte of spaces costs O(bytes), not O(bytes squared)."""
    import tensorflow as tf

    from serving.model import tokenizer

    encoder = tokenizer.BpeEncoder(_spec())
    widths: list[int] = []
    real = encoder.merge
    monkeypatch.setattr(encoder, "merge", lambda ids: widths.append(ids.shape[1]) or real(ids))
    ids = encoder(tf.constant([" " * 100_000, "short"])).to_list()
    assert widths == [bpe.MAX_WORD_BYTES + 2]
    assert sum(len(_spec().pieces()[i]) for i in ids[0]) == 100_000


def test_text_after_a_nul_byte_is_read_not_dropped() -> None:
    import tensorflow as tf

    from serving.model import tokenizer

    # a NUL from a client's C string or a binary paste: what follows it is still the prompt
    vocab = tokenizer.bpe_vocab(_spec())
    got = vocab.encode(tf.constant(["order\x00 7 arrived broken", "\x00\x00ok"])).to_list()
    want = vocab.encode(tf.constant(["order\ufffd 7 arrived broken", "\ufffd\ufffdok"])).to_list()
    assert got == want
    assert b"".join(vocab.pieces[i] for i in got[0]).decode().endswith(" 7 arrived broken")


def test_cut_keeps_order_and_cuts_at_the_width() -> None:
    import tensorflow as tf

    from serving.model import tokenizer

    rows = tf.ragged.constant([[], list(range(5)), list(range(4)), list(range(9))])
    got = tokenizer.cut(rows, 4).to_list()
    assert got == [[], [[0, 1, 2, 3], [4]], [[0, 1, 2, 3]], [[0, 1, 2, 3], [4, 5, 6, 7], [8]]]
    longest_special = max(len(t.encode()) for t in chatformat.SPECIAL_TOKENS)
    assert longest_special <= bpe.MAX_WORD_BYTES  # a special token's text stays one piece


def test_special_token_text_is_one_id_each() -> None:
    import tensorflow as tf

    from serving.model import tokenizer

    spec = _spec()
    ids = tokenizer.bpe_vocab(spec).encode(tf.constant([TEXTS[5]])).to_list()[0]
    assert ids == list(reversed(spec.special_ids))  # end-of-turn, then end-of-text
    assert spec.special_ids == (spec.vocab_size - 2, spec.vocab_size - 1)


def test_end_of_turn_ends_a_row_as_end_of_text_does() -> None:
    import tensorflow as tf

    from serving.model import tokenizer

    vocab = tokenizer.bpe_vocab(_spec())
    eot, eot_turn = _spec().special_ids
    assert vocab.end_ids == (eot, eot_turn)
    ended = vocab.is_end(tf.constant([eot, eot_turn, 97], tf.int32)).numpy().tolist()
    assert ended == [True, True, False]


def test_spec_round_trips_and_refuses_another_split() -> None:
    spec = _spec()
    assert bpe.BpeSpec.from_json(spec.to_json()) == spec
    with pytest.raises(bpe.BpeError, match="split pattern"):
        bpe.BpeSpec.from_json(spec.to_json().replace("\\\\p{N}", "\\\\d"))
    cut_elsewhere = spec.to_json().replace(
        f'"max_word_bytes": {bpe.MAX_WORD_BYTES}', '"max_word_bytes": 32'
    )
    with pytest.raises(bpe.BpeError, match="cut at 32 bytes"):
        bpe.BpeSpec.from_json(cut_elsewhere)
    with pytest.raises(bpe.BpeError, match="do not fit"):
        bpe.BpeSpec(300, spec.merges)


def test_training_is_deterministic() -> None:
    docs = data.documents(20_000)
    assert bpe.train(docs, 300) == bpe.train(docs, 300)


def test_byte_vocab_encodes_utf8_bytes_per_row() -> None:
    import tensorflow as tf

    from serving.model import tokenizer

    ids = tokenizer.byte_vocab().encode(tf.constant(["hé", "", "ab"]))
    assert ids.to_list() == [[104, 0xC3, 0xA9], [], [97, 98]]


def test_decode_respects_lengths_and_sanitises_split_characters() -> None:
    import tensorflow as tf

    from serving.model import tokenizer

    ids = tf.constant([[104, 0xC3, 0xA9, 0], [0xC3, 97, 0, 0], [104, 0xC3, 0xA9, 0]])
    text = tokenizer.decode(tokenizer.byte_vocab(), ids, tf.constant([3, 2, 2]))
    assert [t.decode() for t in text.numpy()] == ["hé", "\ufffda", "h"]  # é cut short: dropped


def test_end_of_text_decodes_to_nothing() -> None:
    import tensorflow as tf

    from serving.model import tokenizer

    ids = tf.constant([[97, tokenizer.BYTE_EOT_ID, 98]])
    text = tokenizer.decode(tokenizer.byte_vocab(), ids, tf.constant([3]))
    assert text.numpy()[0] == b"ab"
