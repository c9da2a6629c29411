"""The `continue` signature: chunks concatenated equal the unary `serving_default` output."""

from __future__ import annotations

import pytest

from serving.model.config import get_preset
from tokenpulse.tfserving import signature as sig

CONTEXT = get_preset("tiny").model.context


@pytest.fixture(scope="module")
def model(tiny_loaded):
    return tiny_loaded


@pytest.fixture(scope="module")
def unary(model):
    return model.signatures[sig.SIGNATURE_NAME]


@pytest.fixture(scope="module")
def cont(model):
    return model.signatures[sig.CONTINUE_SIGNATURE_NAME]


def request(prompt, max_new_tokens=40, **kw) -> dict:
    """One request's settings, greedy unless `kw` says otherwise."""
    return sig.default_row(prompt, max_new_tokens) | kw


def call_unary(fn, reqs: list[dict]) -> list[dict]:
    import tensorflow as tf

    inputs = {k: tf.constant([r[k] for r in reqs], tf.as_dtype(t)) for k, t in sig.INPUTS.items()}
    out = {k: v.numpy() for k, v in fn(**inputs).items()}
    return [{k: v[i] for k, v in out.items()} for i in range(len(reqs))]


def call_continue(fn, rows: list[dict]) -> list[dict]:
    """Rows carry `generated` as raw bytes; outputs per row, tokens cut at n_tokens, ids listed."""
    import tensorflow as tf

    kinds = sig.CONTINUE_INPUTS
    inputs = {k: tf.constant([r[k] for r in rows], tf.as_dtype(t)) for k, t in kinds.items()}
    out = {k: v.numpy() for k, v in fn(**inputs).items()}
    result = []
    for i in range(len(rows)):
        row = {k: v[i] for k, v in out.items()}
        row["bytes"] = bytes(row["tokens"][: row["n_tokens"]].tolist())
        row["ids"] = [int(t) for t in row["token_ids"].split()]
        row["finish_reason"] = row["finish_reason"].decode()
        result.append(row)
    return result


def at(req: dict, generated: bytes, chunk: int, ids: list[int] | None = None) -> dict:
    """The `continue` row of a request resumed after `generated`, the bytes of the tokens `ids`
    (None: none sent, so the model tokenizes the bytes; the step counts them)."""
    step = len(generated) if ids is None else len(ids)
    return req | {"generated": generated, "generated_ids": " ".join(map(str, ids or ())),
                  "step": step, "chunk": chunk}  # fmt: skip


def stream(fn, req: dict, chunks: list[int]) -> dict:
    """Call `continue` until the row finishes, handing each chunk's ids back; chunk sizes from
    `chunks`, the last repeating."""
    generated, ids, pieces, counts, nll, scored = b"", [], [], [], 0.0, 0
    while True:
        chunk = chunks[min(len(pieces), len(chunks) - 1)]
        (out,) = call_continue(fn, [at(req, generated, chunk, ids)])
        # `n_tokens` counts the chunk's bytes and a subword token is several: the chunk's
        # tokens are the ones it scored (its end token included)
        assert 0 <= out["n_scored"] <= chunk and out["n_tokens"] >= out["n_scored"] - 1
        assert out["tokens"][out["n_tokens"] :].tolist() == [0] * (
            len(out["tokens"]) - out["n_tokens"]
        )
        generated += out["bytes"]
        ids += out["ids"]
        pieces.append((out["bytes"], out["ids"]))
        counts.append(int(out["n_scored"]))
        nll += float(out["nll_sum"])
        scored += int(out["n_scored"])
        if out["finish_reason"]:
            assert len(pieces) < 200
            return out | {"bytes": generated, "ids": ids, "pieces": pieces, "counts": counts,
                          "nll": nll, "scored": scored}  # fmt: skip
        assert out["n_scored"] == chunk  # a row that may go on filled its chunk


def text_of(raw: bytes, at_stop: bool = False) -> bytes:
    """What `serving_default` makes of raw bytes: invalid UTF-8 replaced the model's way, and,
    where the generation ended (not at a stop sequence), a last character cut short dropped."""
    import tensorflow as tf

    from serving.model import tokenizer
    from serving.model.vocab import finished_text

    text = tf.constant(raw)
    return (tokenizer.sanitize_utf8(text) if at_stop else finished_text(text)).numpy()


def assert_same(streamed: dict, whole: dict) -> None:
    at_stop = int(whole.get("stop_index", sig.NO_STOP)) != sig.NO_STOP
    assert text_of(streamed["bytes"], at_stop) == whole["text"]
    # the same tokens: unary's, plus the end token when one ended the row (scored, not output)
    assert whole["output_tokens"] <= streamed["scored"] <= whole["output_tokens"] + 1
    assert streamed["finish_reason"] == whole["finish_reason"].decode()
    assert streamed["prompt_tokens"] == whole["prompt_tokens"]
    assert streamed["truncated_prompt_tokens"] == whole["truncated_prompt_tokens"]
    mean = streamed["nll"] / streamed["scored"] if streamed["scored"] else 0.0
    assert mean == pytest.approx(float(whole["mean_nll"]), abs=1e-4)


SAMPLED = [
    request("The assert statement", 40, temperature=1.0, seed=7),
    request("Return the number of", 33, temperature=1.5, top_k=20, seed=123456789012),
    request("If the argument is", 25, temperature=0.8, top_p=0.9, seed=3),
]


def test_the_signature_speaks_the_contract(cont) -> None:
    _, kwargs = cont.structured_input_signature
    assert set(kwargs) == set(sig.CONTINUE_INPUTS)
    assert {k: v.dtype.name for k, v in kwargs.items()} == sig.CONTINUE_INPUTS
    for name, spec in kwargs.items():
        assert spec.shape.rank == (2 if name == "stop" else 1) and spec.shape[0] is None
    assert {k: v.dtype.name for k, v in cont.structured_outputs.items()} == sig.CONTINUE_OUTPUTS


@pytest.mark.parametrize("chunk", [1, 4, 16])
def test_streamed_greedy_equals_unary(unary, cont, chunk: int) -> None:
    reqs = [request("The assert statement", 40), request("x", 23), request("", 9)]
    for req, whole in zip(reqs, call_unary(unary, reqs), strict=True):
        streamed = stream(cont, req, [chunk])
        assert_same(streamed, whole)
        assert len(streamed["pieces"]) == -(-int(whole["output_tokens"]) // chunk) + (
            whole["output_tokens"] % chunk == 0 and whole["finish_reason"] == b"stop"
        )


@pytest.mark.parametrize("chunk", [1, 4, 16])
def test_streamed_sampling_equals_unary(unary, cont, chunk: int) -> None:
    for req, whole in zip(SAMPLED, call_unary(unary, SAMPLED), strict=True):
        assert_same(stream(cont, req, [chunk]), whole)


def test_chunks_of_mixed_sizes_equal_unary(unary, cont) -> None:
    for req, whole in zip(SAMPLED, call_unary(unary, SAMPLED), strict=True):
        assert_same(stream(cont, req, [3, 1, 7, 2, 16, 5]), whole)


def test_a_utf8_character_split_between_chunks_streams_as_unary(unary, cont) -> None:
    # Byte-level subwords may hold part of a character: one token a chunk, some chunk ends
    # inside a character and the next resumes mid-character.
    reqs = [request("用户：我的快递怎么还没到？", 16, temperature=1.5, seed=s) for s in range(8)]
    for req, whole in zip(reqs, call_unary(unary, reqs), strict=True):
        streamed = stream(cont, req, [1])
        split = [b for b, _ in streamed["pieces"] if b and not _decodes(b)]
        if split:
            assert_same(streamed, whole)
            return
    raise AssertionError("no sampled row split a character between tokens")


def _decodes(piece: bytes) -> bool:
    try:
        piece.decode()
    except UnicodeDecodeError:
        return False
    return True


def test_end_of_text_mid_chunk_stops_the_row(unary, cont) -> None:
    reqs = [request("The assert statement", 60, temperature=1.5, seed=s) for s in range(64)]
    wholes = call_unary(unary, reqs)
    i = next(
        i for i, w in enumerate(wholes) if w["finish_reason"] == b"stop" and w["output_tokens"] % 4
    )
    streamed = stream(cont, reqs[i], [4])
    assert streamed["finish_reason"] == sig.FINISH_STOP
    # stopped inside its last chunk: its tokens, then the end token (scored, not output)
    assert streamed["counts"][-1] == wholes[i]["output_tokens"] % 4 + 1 <= 4
    assert_same(streamed, wholes[i])


def test_end_of_text_first_stops_with_nothing() -> None:
    import tensorflow as tf

    from serving.model.generate import Generator
    from serving.model.tokenizer import BYTE_EOT_ID, byte_vocab
    from serving.model.transformer import GPT

    model = GPT(get_preset("tiny").model)
    model.lnf_g.assign(tf.zeros_like(model.lnf_g))  # end-of-text is the likeliest token everywhere
    model.lnf_b.assign(model.wte[BYTE_EOT_ID] * 50.0)
    generator = Generator(model, byte_vocab(model.cfg.vocab_size))
    (out,) = call_continue(generator.continue_chunk, [at(request("anything", 10), b"so far", 4)])
    assert (out["finish_reason"], out["n_tokens"], out["n_scored"]) == ("stop", 0, 1)
    assert out["nll_sum"] >= 0


def test_the_length_budget_ends_the_last_chunk(cont) -> None:
    req = request("The assert statement", 10, temperature=1.0, seed=5)
    streamed = stream(cont, req, [4])
    assert streamed["finish_reason"] == sig.FINISH_LENGTH
    assert streamed["counts"] == [4, 4, 2]  # tokens a chunk
    assert stream(cont, req, [5])["counts"] == [5, 5]  # the last ends exactly
    everything = streamed["bytes"], 4, streamed["ids"]
    done = call_continue(cont, [at(req, *everything), at(req | {"max_new_tokens": 0}, b"", 4)])
    for out in done:  # nothing left to generate: no token, nothing scored
        assert (out["finish_reason"], out["n_tokens"], out["n_scored"]) == ("length", 0, 0)
        assert out["nll_sum"] == 0.0


def test_a_zero_chunk_generates_nothing_and_may_go_on(cont) -> None:
    (out,) = call_continue(cont, [at(request("Return", 10), b"ab", 0)])
    assert (out["finish_reason"], out["n_tokens"], out["n_scored"]) == ("", 0, 0)


def test_a_truncated_long_prompt_streams_as_unary(unary, cont) -> None:
    reqs = [
        request("abcdefghij " * 60, 20, temperature=1.0, seed=11),
        request("abcdefghij " * 60, 500),
    ]
    for req, whole in zip(reqs, call_unary(unary, reqs), strict=True):
        assert whole["truncated_prompt_tokens"] > 0
        streamed = stream(cont, req, [4])
        assert_same(streamed, whole)
        assert streamed["prompt_tokens"] + whole["output_tokens"] <= CONTEXT


def test_generated_bytes_past_the_window_are_refused_quietly(cont) -> None:
    # A client that sends more than the window holds gets a finished row, not an error: ids, or
    # bytes alone, which the model tokenizes
    req = request("hi", 10_000)
    for out in call_continue(cont, [at(req, b"z" * 500, 8, [5] * 500), at(req, b"z" * 500, 8)]):
        assert (out["finish_reason"], out["n_tokens"]) == ("length", 0)


def test_the_generated_ids_are_read_as_given_and_bytes_without_ids_as_text() -> None:
    import tensorflow as tf

    from serving.model.continuation import generated_tokens
    from serving.model.vocab import Vocab

    def encode(text: tf.Tensor) -> tf.RaggedTensor:  # a stand-in tokenizer: a byte's id mod 3
        return tf.strings.unicode_decode(text, "UTF-8") % 3

    vocab = Vocab((b"ab", b"cde", b"x", b""), 3, encode, resumable=False)
    generated = tf.constant(["abx", "cdex", "", "x", "ab"])
    ids = tf.constant(["0 2", "", "", "2", " 0 "])
    got = generated_tokens(vocab, generated, ids).to_list()
    assert got == [[0, 2], [99 % 3, 100 % 3, 101 % 3, 120 % 3], [], [2], [0]]
    for bad, says in (("0 4", "outside the vocabulary"), ("-1", "outside"), ("1 x", "x")):
        with pytest.raises(tf.errors.InvalidArgumentError, match=says):
            generated_tokens(vocab, tf.constant(["ab"]), tf.constant([bad]))


def test_an_empty_batch_answers_empty_outputs(cont) -> None:
    import tensorflow as tf

    out = call_continue(cont, [])
    assert out == []
    inputs = {k: tf.zeros([0], tf.as_dtype(t)) for k, t in sig.CONTINUE_INPUTS.items()}
    raw = cont(**inputs)
    assert set(raw) == set(sig.CONTINUE_OUTPUTS)
    assert all(v.shape[0] == 0 for v in raw.values())


def test_rows_at_different_steps_in_one_batch_answer_as_alone(unary, cont) -> None:
    rows = []
    for n, (req, chunk) in enumerate(
        zip([*SAMPLED, request("x", 30), request("", 5)], [1, 4, 16, 7, 2], strict=True)
    ):
        pieces = stream(cont, req, [3])["pieces"][:n]
        so_far, ids = b"".join(b for b, _ in pieces), [i for _, got in pieces for i in got]
        rows.append(at(req, so_far, chunk, ids))
    alone = [call_continue(cont, [r])[0] for r in rows]
    together = call_continue(cont, rows)
    assert len({r["step"] for r in rows}) > 1 and len({r["chunk"] for r in rows}) > 1
    for a, t in zip(alone, together, strict=True):
        assert (t["bytes"], t["n_tokens"], t["finish_reason"]) == (
            a["bytes"],
            a["n_tokens"],
            a["finish_reason"],
        )
        assert (t["n_scored"], t["prompt_tokens"]) == (a["n_scored"], a["prompt_tokens"])
        assert float(t["nll_sum"]) == pytest.approx(float(a["nll_sum"]), abs=1e-4)
