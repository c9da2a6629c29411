"""keras_hub presets (GPT-2, Qwen) imported into the serving contract: what they generate, token
for token against keras_hub's own `generate`, unary and streamed, with stops, and `model check`.

Each family's module shares one cached import (tests/support/hub.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from serving.model.check import run as run_check
from serving.model.settings import CheckSettings
from tests.support.hub import (
    cached_gpt2_import,
    cached_qwen_import,
)
from tokenpulse.tfserving import signature as sig
from tokenpulse.tfserving.ops import load_saved_model

if TYPE_CHECKING:
    import tensorflow as tf

# different lengths, left-padded in one batch; a Chinese customer's question (3 bytes a character)
PROMPTS = ["The assert statement says", "If", "请问我的订单什么时候发货？"]
NEW = 16


@pytest.fixture(scope="module", params=["gpt2", "qwen"])
def family(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def export(family: str) -> Path:
    return cached_gpt2_import() if family == "gpt2" else cached_qwen_import()


@pytest.fixture(scope="module")
def signatures(export: Path) -> Any:
    return load_saved_model(export).signatures  # TF.Text's ops first, as the server has them


@pytest.fixture(scope="module")
def keras_lm(family: str, hub_lm: Callable[[str], Any]) -> Any:
    from keras_hub.samplers import GreedySampler

    lm = hub_lm(family)
    # keras_hub's own generate function (`make_generate_function`: its `generate_step` in a
    # tf.function), traced without XLA: the same ops, 3-5x less CPU than eager for these calls
    lm.sampler, lm.jit_compile = GreedySampler(), False
    return lm


@pytest.fixture(scope="module")
def refs(keras_lm: Any) -> list[list[int]]:
    """keras_hub's own greedy ids for each prompt."""
    return [reference(keras_lm, p, NEW) for p in PROMPTS]


def reference(lm: Any, prompt: str, new: int) -> list[int]:
    """keras_hub's own greedy generation from its own preprocessor's ids: the ids after the
    prompt, up to end-of-text.

    GPT-2's preprocessor starts a prompt with end-of-text, Qwen's with nothing; a blank prompt,
    which keras_hub cannot generate from without a start token, starts with end-of-text."""
    import tensorflow as tf

    eot = lm.preprocessor.tokenizer.end_token_id
    x = lm.preprocessor.generate_preprocess([prompt], sequence_length=64)
    ids = np.asarray(x["token_ids"][0])[np.asarray(x["padding_mask"][0])].tolist() or [eot]
    length = len(ids)
    x = {
        "token_ids": tf.constant([ids + [0] * (64 - length)], tf.int32),
        "padding_mask": tf.constant([[True] * length + [False] * (64 - length)]),
    }
    out = lm.make_generate_function()(x, [eot])
    ids = np.asarray(out["token_ids"][0])[length : length + new].tolist()
    return ids[: ids.index(eot)] if eot in ids else ids


def text_of(table: dict[int, bytes], ids: list[int]) -> bytes:
    """The text `serving_default` answers for these ids, generated to the end (invalid UTF-8
    replaced, a last character cut short dropped)."""
    import tensorflow as tf

    from serving.model.vocab import finished_text

    return finished_text(tf.constant(b"".join(table[i] for i in ids))).numpy()


def rows(prompts: list[str], **fields: Any) -> dict[str, tf.Tensor]:
    """Greedy request tensors, one row per prompt, `fields` overriding every row's inputs."""
    import tensorflow as tf

    table = [sig.default_row(p, NEW) | fields for p in prompts]
    kinds = {"string": tf.string, "int32": tf.int32, "float32": tf.float32, "int64": tf.int64}
    return {n: tf.constant([r[n] for r in table], kinds[k]) for n, k in sig.INPUTS.items()}


def unary(signatures: Any, prompts: list[str], **fields: Any) -> list[dict[str, Any]]:
    out = signatures[sig.SIGNATURE_NAME](**rows(prompts, **fields))
    return [{k: v.numpy()[i] for k, v in out.items()} for i in range(len(prompts))]


def streamed(signatures: Any, prompt: str, chunk: int, **fields: Any) -> dict[str, Any]:
    """One row through `continue`, `chunk` tokens a call, as the gateway sends it."""
    import tensorflow as tf

    fn = signatures[sig.CONTINUE_SIGNATURE_NAME]
    got, ids, nll, scored, calls, finish = b"", b"", 0.0, 0, 0, ""
    while not finish and calls < 64:
        row = rows([prompt], **fields)
        extra = {"generated": [got], "generated_ids": [ids], "step": [len(ids.split())],
                 "chunk": [chunk]}  # fmt: skip
        out = fn(**row, **{k: tf.constant(v) for k, v in extra.items()})
        n = int(out["n_tokens"][0])
        got += bytes(out["tokens"][0].numpy()[:n].tolist())
        ids = b" ".join(filter(None, (ids, out["token_ids"][0].numpy())))
        nll += float(out["nll_sum"][0])
        scored += int(out["n_scored"][0])
        finish, calls = out["finish_reason"][0].numpy().decode(), calls + 1
    return {"bytes": got, "nll": nll / max(scored, 1), "finish": finish, "calls": calls}


def pieces(lm: Any) -> dict[int, bytes]:
    from serving.model.hub import bpe

    vocab = bpe.vocab(lm.preprocessor, lm.backbone.vocabulary_size)
    return dict(enumerate(vocab.pieces))


def test_greedy_unary_equals_keras_hubs_own_generate_token_for_token(
    signatures: Any, keras_lm: Any, refs: list[list[int]]
) -> None:
    import tensorflow as tf

    from serving.model.decoding import Sampling, generate_loop
    from serving.model.generate import Generator, _budgets, prompt_ids
    from serving.model.hub.importer import ADAPTERS

    decoder, vocab = ADAPTERS[type(keras_lm).__name__][1](keras_lm)
    assert all(len(r) > 4 for r in refs)  # the random model writes something before stopping
    # the loop's own ids, traced in process: the tokens keras_hub chose, one by one
    gen, n = Generator(decoder, vocab), len(PROMPTS)

    @tf.function
    def loop(prompts: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        ids, lengths, _ = prompt_ids(prompts, vocab)
        keep, _, allowed = _budgets(decoder.cfg.context, lengths, tf.fill([n], NEW))
        zeros = tf.zeros([n], tf.int32)
        params = Sampling(tf.zeros([n]), zeros, tf.ones([n]), tf.zeros([n], tf.int64), zeros)
        ending = gen._ending(tf.fill([n, 1], ""))
        out = generate_loop(decoder, vocab, ids, lengths, keep, allowed, params, ending)
        return out.tokens, out.n_out

    tokens, n_out = loop(tf.constant(PROMPTS))
    for row, ref in enumerate(refs):
        assert tokens[row, : int(n_out[row])].numpy().tolist() == ref
    # the exported signature: the same tokens' text and count, the prompt read as keras_hub's
    # preprocessor reads it (its own tokens only: no start token counted)
    table, tokenizer = pieces(keras_lm), keras_lm.preprocessor.tokenizer
    for prompt, got, ref in zip(PROMPTS, unary(signatures, PROMPTS), refs, strict=True):
        assert (got["text"], int(got["output_tokens"])) == (text_of(table, ref), len(ref))
        assert int(got["prompt_tokens"]) == len(tokenizer(prompt))
        assert got["finish_reason"] == (b"length" if len(ref) == NEW else b"stop")
        assert float(got["mean_nll"]) > 0


def test_a_blank_prompt_starts_from_end_of_text(signatures: Any, keras_lm: Any) -> None:
    ref = reference(keras_lm, "", NEW)
    (got,) = unary(signatures, [""])
    assert (got["text"], int(got["output_tokens"])) == (text_of(pieces(keras_lm), ref), len(ref))
    assert (int(got["prompt_tokens"]), int(got["truncated_prompt_tokens"])) == (0, 0)


def test_a_tf1_session_loads_it_as_tf_serving_does_and_answers_the_same(
    export: Path, signatures: Any
) -> None:
    """TF Serving restores the variables with the SavedModel's restore op and runs the
    signature's tensors in a session: it must find every weight and answer as the TF2 load does
    (both signatures read the same variables, so one is enough)."""
    from serving.model import session

    hot = {"temperature": 0.9, "top_k": 40, "top_p": 0.9, "seed": 5}
    batch = [sig.default_row(p, NEW) for p in PROMPTS] + [sig.default_row(PROMPTS[0], NEW) | hot]
    with session.load(export) as model:
        got = model.run(sig.SIGNATURE_NAME, batch)
    want = unary(signatures, PROMPTS) + unary(signatures, PROMPTS[:1], **hot)
    for i, row in enumerate(want):
        for name in ("text", "output_tokens", "finish_reason", "prompt_tokens"):
            assert got[name][i] == row[name], (i, name)
        assert got["mean_nll"][i] == pytest.approx(float(row["mean_nll"]), abs=1e-5)


@pytest.mark.parametrize("chunk", [1, 3])
def test_streamed_greedy_equals_unary_chunk_by_chunk(
    signatures: Any, keras_lm: Any, refs: list[list[int]], chunk: int
) -> None:
    table = pieces(keras_lm)
    for prompt, whole, ref in zip(PROMPTS, unary(signatures, PROMPTS), refs, strict=True):
        got = streamed(signatures, prompt, chunk)
        assert got["bytes"] == b"".join(table[i] for i in ref)
        assert got["finish"] == whole["finish_reason"].decode()
        assert got["nll"] == pytest.approx(float(whole["mean_nll"]), abs=1e-4)
        assert got["calls"] >= -(-len(ref) // chunk)


def test_streamed_sampling_equals_unary_per_row(signatures: Any) -> None:
    import tensorflow as tf

    from serving.model.vocab import finished_text

    hot = {"temperature": 0.9, "top_k": 40, "top_p": 0.9, "seed": 11}
    together = unary(signatures, PROMPTS, **hot)
    for prompt, whole in zip(PROMPTS, together, strict=True):
        (alone,) = unary(signatures, [prompt], **hot)
        got = streamed(signatures, prompt, 4, **hot)
        assert alone["text"] == whole["text"] and alone["output_tokens"] == whole["output_tokens"]
        assert finished_text(tf.constant(got["bytes"])).numpy() == whole["text"]
        assert got["nll"] == pytest.approx(float(whole["mean_nll"]), abs=1e-4)


def test_a_stop_sequence_ends_the_row_even_inside_a_token(
    signatures: Any, keras_lm: Any, refs: list[list[int]]
) -> None:
    import tensorflow as tf

    table, ref = pieces(keras_lm), refs[0]
    raw = b"".join(table[i] for i in ref)
    ends = np.cumsum([len(table[i]) for i in ref]).tolist()  # token boundaries in bytes
    # a 2-byte piece seen first at k that ends inside a token: the row stops there, mid-token
    k = next(k for k in range(1, len(raw) - 2) if raw.find(raw[k : k + 2]) == k
             and k + 2 not in ends and max(raw[k : k + 2]) < 0x80)  # fmt: skip
    stop = raw[k : k + 2].decode()
    (got,) = unary(signatures, PROMPTS[:1], stop=sig.stop_slots(("\x00zz", stop)))
    want = tf.strings.unicode_transcode(raw[:k], "UTF-8", "UTF-8", errors="replace").numpy()
    assert (got["text"], got["finish_reason"], int(got["stop_index"])) == (want, b"stop", 1)
    assert int(got["output_tokens"]) == next(i for i, end in enumerate(ends) if end > k + 1) + 1
    chunks = streamed(signatures, PROMPTS[0], 2, stop=sig.stop_slots((stop,)))
    assert chunks["finish"] == "stop" and chunks["bytes"] == raw[: k + 2]


def test_model_check_passes_with_streaming_and_stops_in_the_graph(export: Path) -> None:
    report = run_check(CheckSettings(path=export, max_new_tokens=12, chunk=5))
    assert report.exit_code == 0, report.table()
    summary = report.to_json()
    assert {"required", "streaming", "stop_in_graph"} <= set(summary["supported"])
    assert summary["degraded"] == []
    assert any(f.check == "ops" and f.level == "ok" for f in report.findings)
