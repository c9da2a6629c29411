"""Generation through the exported SavedModel's `serving_default` signature."""

from __future__ import annotations

import numpy as np
import pytest

from serving.model.config import get_preset
from tests.support.models import tiny_tokens
from tokenpulse.tfserving import signature as sig

CONTEXT = get_preset("tiny").model.context


@pytest.fixture(scope="module")
def serve(tiny_loaded):
    return tiny_loaded.signatures[sig.SIGNATURE_NAME]


def call(fn, rows: list[dict]) -> list[dict]:
    """Run the signature on rows (dicts of inputs) and return per-row python outputs."""
    import tensorflow as tf

    dtypes = {"string": tf.string, "int32": tf.int32, "float32": tf.float32, "int64": tf.int64}
    inputs = {k: tf.constant([r[k] for r in rows], dtype=dtypes[t]) for k, t in sig.INPUTS.items()}
    out = {k: v.numpy() for k, v in fn(**inputs).items()}
    result = []
    for i in range(len(rows)):
        row = {k: v[i] for k, v in out.items()}
        row["text"] = row["text"].decode("utf-8")
        row["finish_reason"] = row["finish_reason"].decode()
        result.append(row)
    return result


def row(prompt, max_new_tokens=16, **kw) -> dict:
    r = sig.default_row(prompt, max_new_tokens)
    r.update(kw)
    return r


def test_every_input_and_output_is_batched(serve) -> None:
    _, kwargs = serve.structured_input_signature
    assert set(kwargs) == set(sig.INPUTS)
    for name, spec in kwargs.items():
        assert spec.shape.rank == (2 if name == "stop" else 1) and spec.shape[0] is None
    assert set(serve.structured_outputs) == set(sig.OUTPUTS)


def test_greedy_row_reports_its_signals(serve) -> None:
    (out,) = call(serve, [row("The assert statement", 12)])
    assert out["prompt_tokens"] == tiny_tokens("The assert statement") < len("The assert")
    assert out["truncated_prompt_tokens"] == 0
    assert out["finish_reason"] in (sig.FINISH_STOP, sig.FINISH_LENGTH)
    if out["finish_reason"] == sig.FINISH_LENGTH:
        assert out["output_tokens"] == 12
    # each token is a byte or more; U+FFFD stands for 1-3 of them, a character cut short for none
    assert len(out["text"].encode()) + 3 >= out["output_tokens"] - 3 * out["text"].count("\ufffd")
    assert out["text"] and "<|" not in out["text"]  # special tokens stand for no text
    assert out["mean_nll"] >= 0


def test_empty_prompt_generates(serve) -> None:
    (out,) = call(serve, [row("", 8)])
    assert out["prompt_tokens"] == 0
    assert out["output_tokens"] <= 8 and out["mean_nll"] >= 0


def test_long_prompt_keeps_its_end_and_reports_truncation(serve) -> None:
    prompt = "abcdefghij " * 60  # 660 bytes, far over the 128-token window
    (out,) = call(serve, [row(prompt, 10)])
    assert out["truncated_prompt_tokens"] > 0
    assert out["prompt_tokens"] + out["truncated_prompt_tokens"] == tiny_tokens(prompt)
    assert out["prompt_tokens"] + 10 <= CONTEXT
    assert out["output_tokens"] <= 10


def test_invalid_utf8_prompt_is_replaced(serve) -> None:
    (out,) = call(serve, [row(b"ab\xff\xfe", 4)])
    assert out["prompt_tokens"] == 2 + 2 * 3  # two U+FFFD of three bytes each


def test_max_new_tokens_zero_and_beyond_the_window_are_clamped(serve) -> None:
    zero, huge, negative = call(serve, [row("hi", 0), row("hi", 10_000), row("hi", -5)])
    assert (zero["output_tokens"], zero["text"], zero["finish_reason"]) == (0, "", "length")
    assert zero["mean_nll"] == 0.0
    assert negative["output_tokens"] == 0
    assert huge["output_tokens"] <= CONTEXT - huge["prompt_tokens"] - 1
    if huge["finish_reason"] == "length":
        assert huge["output_tokens"] == CONTEXT - huge["prompt_tokens"] - 1


def test_greedy_output_is_identical_alone_and_in_a_mixed_batch_of_32(serve) -> None:
    probes = ["The assert statement", "Return the", "x", "If the argument is"]
    alone = [call(serve, [row(p, 20)])[0] for p in probes]
    rng = np.random.default_rng(0)
    batch = []
    for i in range(32):
        if i % 8 == 0:
            batch.append(row(probes[i // 8], 20))
        else:  # other rows: different lengths, budgets and sampling settings
            text = "".join(rng.choice(list("abc def\n"), size=int(rng.integers(0, 90))))
            batch.append(
                row(
                    text,
                    int(rng.integers(0, 40)),
                    temperature=float(rng.uniform(0, 2)),
                    top_k=int(rng.integers(0, 50)),
                    top_p=float(rng.uniform(0.1, 1)),
                    seed=int(rng.integers(0, 2**40)),
                )
            )
    mixed = call(serve, batch)
    for i, single in enumerate(alone):
        together = mixed[i * 8]
        assert together["text"] == single["text"]
        assert together["output_tokens"] == single["output_tokens"]
        assert together["mean_nll"] == pytest.approx(single["mean_nll"], abs=1e-4)


def test_seeded_sampling_is_reproducible_and_independent_of_the_batch(serve) -> None:
    sampled = row("The default", 24, temperature=1.0, seed=42)
    alone = call(serve, [sampled])[0]
    again = call(serve, [row("zzz", 5, temperature=1.0, seed=1), sampled])[1]
    assert again["text"] == alone["text"]
    others = {
        call(serve, [row("The default", 24, temperature=1.0, seed=s)])[0]["text"] for s in range(5)
    }
    assert len(others) > 1  # different seeds explore different continuations


def test_top_k_one_is_greedy(serve) -> None:
    greedy, top1 = call(
        serve, [row("Return", 16), row("Return", 16, temperature=1.3, top_k=1, seed=9)]
    )
    assert top1["text"] == greedy["text"]


def test_tiny_top_p_is_greedy(serve) -> None:
    greedy, nucleus = call(
        serve, [row("Return", 16), row("Return", 16, temperature=1.0, top_p=1e-6, seed=3)]
    )
    assert nucleus["text"] == greedy["text"]


def test_end_of_text_stops_a_row_with_finish_reason_stop() -> None:
    import tensorflow as tf

    from serving.model.generate import Generator
    from serving.model.tokenizer import BYTE_EOT_ID, byte_vocab
    from serving.model.transformer import GPT

    cfg = get_preset("tiny").model
    model = GPT(cfg)
    # Make end-of-text the most likely token everywhere: output layer sees only the bias.
    model.lnf_g.assign(tf.zeros_like(model.lnf_g))
    model.lnf_b.assign(model.wte[BYTE_EOT_ID] * 50.0)
    generator = Generator(model, byte_vocab(model.cfg.vocab_size))
    out = call(lambda **kw: generator.serve(**kw), [row("anything", 10), row("x", 0)])
    assert (out[0]["finish_reason"], out[0]["output_tokens"], out[0]["text"]) == ("stop", 0, "")
    assert out[0]["mean_nll"] >= 0
    assert out[1]["finish_reason"] == "length"
