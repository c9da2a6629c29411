"""Stop sequences and ignore_eos inside the decoding loop, unary and streamed (`continue`)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

from serving.model.config import ModelConfig, get_preset
from tests.serving.model.test_continuation import (
    at,
    call_continue,
    call_unary,
    request,
    stream,
    text_of,
)
from tokenpulse.tfserving import signature as sig

if TYPE_CHECKING:
    from serving.model.generate import Generator, Sampling


def byte_cfg() -> ModelConfig:
    """The tiny shape over the byte vocabulary."""
    from serving.model.tokenizer import BYTE_EOT_ID

    return dataclasses.replace(get_preset("tiny").model, vocab_size=BYTE_EOT_ID + 1)


@pytest.fixture(scope="module")
def bytes_model() -> Generator:
    """The loop over a byte vocabulary, so that these tests count tokens in bytes: the tiny
    shape with seeded random weights, position embeddings made large so that greedy text varies
    from step to step. Our subword export's stops are tested below and in test_continuation.py."""
    from serving.model.generate import Generator
    from serving.model.tokenizer import byte_vocab
    from serving.model.transformer import GPT

    model = GPT(byte_cfg(), seed=6)  # one whose rows here do not pick end-of-text in 40 bytes
    model.wpe.assign(model.wpe * 40.0)
    model.lnf_g.assign(model.lnf_g * 4.0)
    return Generator(model, byte_vocab())


@pytest.fixture(scope="module")
def unary(bytes_model: Generator):
    return lambda **kw: bytes_model.serve(**kw)


@pytest.fixture(scope="module")
def cont(bytes_model: Generator):
    return lambda **kw: bytes_model.continue_chunk(**kw)


@pytest.fixture(scope="module")
def export(tiny_loaded):
    return tiny_loaded.signatures


@pytest.mark.parametrize("chunk", [1, 4])
def test_a_stop_ends_a_subword_export_row_unary_and_streamed_alike(export, chunk) -> None:
    unary, cont = export[sig.SIGNATURE_NAME], export[sig.CONTINUE_SIGNATURE_NAME]
    raw = stream(cont, HOT, [16])["bytes"]
    k, stop = first_new(raw, 2, 6)
    (out,) = call_unary(unary, [stopping(HOT, "\x01never", stop)])
    assert (out["text"], out["finish_reason"], out["stop_index"]) == (
        text_of(raw[:k], at_stop=True),
        b"stop",
        1,
    )
    assert out["output_tokens"] < k + 2  # subwords: fewer tokens than bytes, the stop's counted
    streamed = stream(cont, stopping(HOT, "\x01never", stop), [chunk])
    assert streamed["bytes"].startswith(raw[:k] + stop.encode())  # the caller cuts the stop
    assert (streamed["finish_reason"], streamed["stop_index"]) == ("stop", 1)
    assert sum(streamed["counts"]) == out["output_tokens"]


def stopping(req: dict, *stops: str, slot: int = 0) -> dict:
    """`req` with `stops` in the stop slots from `slot` on."""
    slots = sig.stop_slots(("\x00\x00",) * slot + stops)  # these prompts never write NULs
    return req | {"stop": slots}


def raw_of(cont, req: dict) -> bytes:
    """The exact bytes a request generates without stop sequences (streamed: not sanitised)."""
    return stream(cont, req, [16])["bytes"]


def first_new(raw: bytes, width: int, start: int) -> tuple[int, str]:
    """The first `width` ASCII bytes from `start` on whose first occurrence in `raw` is there."""
    for k in range(start, len(raw) - width + 1):
        piece = raw[k : k + width]
        if raw.find(piece) == k and max(piece) < 0x80 and 0 not in piece:
            return k, piece.decode()
    raise AssertionError(f"no new {width}-byte piece in {raw!r}")


GREEDY = request("If the argument is", 40)  # the tiny model's greedy text is mostly spaces
HOT = request("The assert statement", 40, temperature=0.8, seed=1)
SAMPLED = request("Return the number of", 40, temperature=1.0, seed=7)


@pytest.mark.parametrize("req", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
@pytest.mark.parametrize("slot", [0, 3])
def test_a_stop_sequence_ends_the_row_and_is_left_out_of_the_text(unary, cont, req, slot) -> None:
    raw = raw_of(cont, req)
    assert len(raw) == 40
    k, stop = first_new(raw, 2, 5)
    (out,) = call_unary(unary, [stopping(req, stop, slot=slot)])
    assert out["text"] == text_of(raw[:k], at_stop=True)
    assert out["output_tokens"] == k + 2  # usage counts the stop sequence, as vLLM's does
    assert (out["finish_reason"], out["stop_index"]) == (b"stop", slot)


def test_rows_that_stop_at_different_steps_answer_as_alone(unary, cont) -> None:
    raw = raw_of(cont, HOT)
    cuts = [first_new(raw, 1, start) for start in (3, 12, 25)]
    rows = [stopping(HOT, stop) for _, stop in cuts]
    rows += [stopping(HOT, "\x01never"), HOT, stopping(SAMPLED, "\x01")]
    together = call_unary(unary, rows)
    alone = [call_unary(unary, [r])[0] for r in rows]
    for (k, _), out in zip(cuts, together[:3], strict=False):
        assert (out["text"], out["output_tokens"], out["stop_index"]) == (
            text_of(raw[:k], at_stop=True),
            k + 1,
            0,
        )
    for out in together[3:]:
        assert (out["finish_reason"], out["stop_index"], out["output_tokens"]) == (
            b"length",
            sig.NO_STOP,
            40,
        )
    for a, t in zip(alone, together, strict=True):
        assert (a["text"], a["output_tokens"], a["finish_reason"], a["stop_index"]) == (
            t["text"],
            t["output_tokens"],
            t["finish_reason"],
            t["stop_index"],
        )
        assert float(a["mean_nll"]) == pytest.approx(float(t["mean_nll"]), abs=1e-4)


def test_of_two_stops_ending_at_one_byte_the_longer_cuts_the_text(unary, cont) -> None:
    raw = raw_of(cont, HOT)
    k = next(k for k in range(3, 39) if raw.find(raw[k + 1 : k + 2]) == k + 1)
    short, long = raw[k + 1 : k + 2].decode(), raw[k : k + 2].decode()
    (out,) = call_unary(unary, [stopping(HOT, short, long)])
    assert (out["text"], out["output_tokens"], out["stop_index"]) == (
        text_of(raw[:k], at_stop=True),
        k + 2,
        1,
    )


def counting_generator() -> tuple[Generator, list[int]]:
    """A random tiny model that never ends its text, counting its decode steps (run eagerly)."""
    from serving.model.generate import Generator
    from serving.model.tokenizer import BYTE_EOT_ID, byte_vocab
    from serving.model.transformer import GPT

    model = GPT(byte_cfg(), seed=3)
    model.lnf_b.assign(-10.0 * model.wte[BYTE_EOT_ID])
    calls: list[int] = []
    decode = model.decode

    def counted(*args):
        calls.append(1)
        return decode(*args)

    model.decode = counted
    return Generator(model, byte_vocab(model.cfg.vocab_size)), calls


def greedy_params(n: int) -> Sampling:
    import tensorflow as tf

    from serving.model.generate import Sampling

    zeros = tf.zeros([n], tf.int32)
    return Sampling(tf.zeros([n]), zeros, tf.ones([n]), tf.zeros([n], tf.int64), zeros)


def run_eagerly(gen: Generator, prompts: list[str], new: int, stops: list[list[bytes]]) -> dict:
    import tensorflow as tf

    n = len(prompts)
    out = gen.generate(
        tf.constant(prompts), tf.fill([n], new), greedy_params(n), tf.constant(stops)
    )
    return {k: v.numpy() for k, v in out.items()}


def test_the_loop_ends_when_every_row_has_stopped() -> None:
    import tensorflow as tf

    gen, calls = counting_generator()
    prompts = ["ab", "xyz"]
    whole = run_eagerly(gen, prompts, 40, [[b""], [b""]])
    assert len(calls) == 39 and list(whole["output_tokens"]) == [40, 40]
    chunk = gen.next_chunk(
        tf.constant(prompts),
        tf.constant(["", ""]),
        tf.constant(["", ""]),
        tf.zeros([2], tf.int32),
        tf.fill([2], 40),
        tf.fill([2], 40),
        greedy_params(2),
        tf.constant([[""], [""]]),
    )
    raws = [bytes(t.tolist()) for t in chunk["tokens"].numpy()]
    calls.clear()
    # a row's first n bytes end there first, whatever bytes a random model writes
    out = run_eagerly(gen, prompts, 40, [[raws[0][:5]], [raws[1][:12]]])
    assert list(out["output_tokens"]) == [5, 12]
    assert list(out["text"]) == [b"", b""]
    # the last row to stop sets the steps: step 0 comes from the prefill, then one per token
    assert len(calls) == max(out["output_tokens"]) - 1


@pytest.mark.parametrize("chunk", [1, 4, 16])
def test_streamed_stop_equals_unary(unary, cont, chunk: int) -> None:
    for req in (GREEDY, SAMPLED):
        raw = raw_of(cont, req)
        k, stop = first_new(raw, 3, 6)
        row = stopping(req, "\x01x", stop, slot=1)
        (whole,) = call_unary(unary, [row])
        streamed = stream(cont, row, [chunk])
        assert streamed["bytes"] == raw[: k + 3]  # the stop's bytes come; the caller cuts them
        assert whole["text"] == text_of(raw[:k], at_stop=True)
        assert len(streamed["bytes"]) == whole["output_tokens"] == k + 3
        assert (streamed["finish_reason"], streamed["stop_index"]) == ("stop", 2)
        assert whole["stop_index"] == 2
        mean = streamed["nll"] / streamed["scored"]
        assert mean == pytest.approx(float(whole["mean_nll"]), abs=1e-4)


def test_a_stop_split_between_chunks_ends_the_row_at_its_last_byte(cont) -> None:
    raw = raw_of(cont, HOT)
    k, stop = first_new(raw, 3, 6)
    row = stopping(HOT, stop)
    (first,) = call_continue(cont, [at(row, b"", k + 2)])  # ends two bytes into the stop
    assert (first["bytes"], first["finish_reason"]) == (raw[: k + 2], "")
    (second,) = call_continue(cont, [at(row, first["bytes"], 8)])
    assert (second["bytes"], second["n_tokens"]) == (raw[k + 2 : k + 3], 1)
    assert (second["finish_reason"], second["stop_index"]) == ("stop", 0)


def test_a_row_whose_bytes_already_end_with_a_stop_generates_nothing(cont) -> None:
    (out,) = call_continue(cont, [at(stopping(HOT, "\x01", "so far"), b"all so far", 8)])
    assert (out["finish_reason"], out["stop_index"], out["n_tokens"], out["n_scored"]) == (
        "stop",
        1,
        0,
        0,
    )


def test_a_multibyte_utf8_stop_ends_the_row_unary_and_split_between_chunks(unary, cont) -> None:
    # The tiny model writes a valid multi-byte character now and then when sampling hot.
    reqs = [request("ééééééééé", 40, temperature=2.0, seed=s) for s in range(64)]
    for req in reqs:
        raw = raw_of(cont, req)
        text = raw.decode("utf-8", "replace").replace("\ufffd", "")
        char = next((c for c in text if ord(c) > 0x7F), None)
        if char is not None and raw.find(char.encode()) > 0:
            break
    else:
        raise AssertionError("no row wrote a multi-byte character")
    stop = char.encode()
    k = raw.find(stop)
    row = stopping(req, char)
    (whole,) = call_unary(unary, [row])
    assert whole["text"] == text_of(raw[:k], at_stop=True)
    assert (whole["output_tokens"], whole["stop_index"]) == (k + len(stop), 0)
    (first,) = call_continue(cont, [at(row, b"", k + 1)])  # one byte into the character
    assert (first["bytes"], first["finish_reason"]) == (raw[: k + 1], "")
    (second,) = call_continue(cont, [at(row, first["bytes"], 8)])
    assert first["bytes"] + second["bytes"] == raw[: k + len(stop)]
    assert (second["finish_reason"], second["stop_index"]) == ("stop", 0)


def eot_everywhere() -> Generator:
    """A tiny model whose likeliest token is end-of-text everywhere."""
    import tensorflow as tf

    from serving.model.generate import Generator
    from serving.model.tokenizer import BYTE_EOT_ID, byte_vocab
    from serving.model.transformer import GPT

    model = GPT(byte_cfg())
    model.lnf_g.assign(tf.zeros_like(model.lnf_g))
    model.lnf_b.assign(model.wte[BYTE_EOT_ID] * 50.0)
    return Generator(model, byte_vocab(model.cfg.vocab_size))


def test_ignore_eos_decodes_past_end_of_text_unary_and_streamed() -> None:
    import tensorflow as tf

    from serving.model.tokenizer import BYTE_EOT_ID

    generator = eot_everywhere()
    rows = [
        request("anything", 10, ignore_eos=1),
        request("anything", 10),
        request("anything", 10, ignore_eos=1, temperature=1.0, seed=4),
    ]
    out = call_unary(lambda **kw: generator.serve(**kw), rows)
    assert [(o["finish_reason"], o["output_tokens"]) for o in out] == [
        (b"length", 10),
        (b"stop", 0),
        (b"length", 10),
    ]
    # this model's logits are the same at every position: the best byte, every time, and its
    # nll under the model's whole distribution (end-of-text included)
    logits = generator.model.logits(tf.constant([[BYTE_EOT_ID, 97]]))[0, -1].numpy()
    byte = int(logits[:BYTE_EOT_ID].argmax())
    assert out[0]["text"] == text_of(bytes([byte]) * 10)
    nll = -float(tf.nn.log_softmax(logits)[byte])
    assert float(out[0]["mean_nll"]) == pytest.approx(nll, rel=1e-4)
    assert nll > float(out[1]["mean_nll"])
    chunks = call_continue(generator.continue_chunk, [at(r, b"so far", 4) for r in rows])
    expected = [("length", 4), ("stop", 0), ("length", 4)]  # 6 + 4 tokens: the budget
    assert [(c["finish_reason"], c["n_tokens"]) for c in chunks] == expected


def test_a_stop_that_ends_inside_a_token_of_several_bytes_is_found_there() -> None:
    import tensorflow as tf

    from serving.model import stops
    from serving.model.vocab import Vocab

    # ids: 0 "ab", 1 "cde", 2 "x", 3 end-of-text (no bytes)
    vocab = Vocab((b"ab", b"cde", b"x", b""), 3, lambda t: t, resumable=False)
    parsed = stops.parse(tf.constant([["bc", "e"], ["d", "xab"], ["zz", ""]]))
    history = stops.empty_history(3, stops.history_width(parsed, vocab.max_bytes))
    table, seen = vocab.token_bytes(), []
    for token in ([0, 2, 0], [1, 0, 1]):
        history, pushed = stops.push(history, tf.constant(token), tf.fill([3], True), table)
        hit = stops.match(parsed, history, pushed)
        seen.append(list(zip(hit.index.numpy().tolist(), hit.tail.numpy().tolist(), strict=True)))
    # row 0: "ab" then "cde": "bc" ends first (2 bytes of the token after it); row 1: "x", "ab"
    # ends "xab" at the token's end; row 2: no stop
    assert seen[0] == [(-1, 0), (-1, 0), (-1, 0)]
    assert seen[1] == [(0, 2), (1, 0), (-1, 0)]
    hit = stops.Hit(tf.constant([0, 1, -1]), tf.constant([2, 0, 0]))
    assert stops.cut_lengths(parsed, hit).numpy().tolist() == [4, 3, 0]  # the stop and after
