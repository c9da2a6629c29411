"""The in-graph generation loop and the two signatures around it: `serving_default` and `continue`.

Prompts are left-padded so every row writes the same cache row at each step; each row keeps its
own positions, mask, sampling parameters and stopping rule, so its output does not depend on
the rest of the batch. `continue` (streaming, `continuation.py`) re-reads the prompt and the bytes
generated so far and runs the same loop from that step on. A row is done at end-of-text (unless it
ignores it), at its budget, or when its bytes end with one of its stop sequences (`stops.py`); the
loop ends when every row is done, so a stopped batch costs the steps it used.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import tensorflow as tf

from serving.model import continuation, sampling, stops, tokenizer
from serving.model.config import EOT_ID, ModelConfig
from serving.model.transformer import GPT, NEG_INF
from tokenpulse.tfserving.signature import FINISH_LENGTH, FINISH_STOP, NO_STOP

SERVING_SPECS = {
    "prompt": tf.TensorSpec([None], tf.string, name="prompt"),
    "max_new_tokens": tf.TensorSpec([None], tf.int32, name="max_new_tokens"),
    "temperature": tf.TensorSpec([None], tf.float32, name="temperature"),
    "top_k": tf.TensorSpec([None], tf.int32, name="top_k"),
    "top_p": tf.TensorSpec([None], tf.float32, name="top_p"),
    "seed": tf.TensorSpec([None], tf.int64, name="seed"),
    "stop": tf.TensorSpec([None, None], tf.string, name="stop"),
    "ignore_eos": tf.TensorSpec([None], tf.int32, name="ignore_eos"),
}


def _budgets(cfg: ModelConfig, lengths: tf.Tensor, max_new: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """Fit each row into the window: (kept prompt length, dropped prompt tokens, new-token cap)."""
    ctx = cfg.context
    wanted = tf.clip_by_value(max_new, 0, ctx - 1)
    # A long prompt keeps its end and leaves room for the request, up to half the window.
    room = tf.minimum(tf.maximum(wanted, 1), ctx // 2)
    keep = tf.minimum(lengths, ctx - room)
    allowed = tf.minimum(wanted, ctx - keep)
    return keep, lengths - keep, allowed


def _empty_outputs() -> dict[str, tf.Tensor]:
    """What `generate` returns for zero rows."""
    none = tf.zeros([0], tf.int32)
    return {
        "text": tf.zeros([0], tf.string),
        "prompt_tokens": none,
        "output_tokens": none,
        "finish_reason": tf.zeros([0], tf.string),
        "mean_nll": tf.zeros([0], tf.float32),
        "truncated_prompt_tokens": none,
        "stop_index": none,
    }


class Sampling(NamedTuple):
    """Per-row sampling inputs, each [B] (`ignore_eos` != 0: end-of-text is never selected)."""

    temperature: tf.Tensor
    top_k: tf.Tensor
    top_p: tf.Tensor
    seed: tf.Tensor
    ignore_eos: tf.Tensor | None = None


class Ending(NamedTuple):
    """What ends a row besides its budget: stop sequences and the bytes it generated before."""

    stops: stops.Stops
    history: tf.Tensor  # [B, L] the last L bytes the row generated before this call


class Decoded(NamedTuple):
    """What the loop produced per row: tokens [B, steps] (0 past `n_out`) and its bookkeeping."""

    tokens: tf.Tensor
    n_out: tf.Tensor
    stopped: tf.Tensor
    nll_sum: tf.Tensor
    n_scored: tf.Tensor
    stop_index: tf.Tensor  # [B] the stop slot that ended the row, NO_STOP for none


def prompt_ids(prompt: tf.Tensor) -> tuple[tf.RaggedTensor, tf.Tensor]:
    """[B] prompts -> (ragged ids with end-of-text as beginning-of-text, [B] lengths)."""
    ids = tokenizer.encode(prompt)
    bos = tf.fill([tf.shape(prompt)[0], 1], EOT_ID)
    ids = tf.concat([bos, ids], axis=1)  # end-of-text doubles as beginning-of-text
    return ids, tf.cast(ids.row_lengths(), tf.int32)


def generate_loop(
    model: GPT,
    ids: tf.RaggedTensor,
    lengths: tf.Tensor,
    keep: tf.Tensor,
    budget: tf.Tensor,
    params: Sampling,
    ending: Ending,
    offset: tf.Tensor | None = None,
) -> Decoded:
    """Prefill each row's last `keep` ids, then select up to `budget` [B] tokens per row.

    The sampler's step for the i-th token of a row is `offset + i` (`offset` [B]: tokens the
    row generated before this call; None: 0), so a generation resumed at a step draws what an
    unbroken one draws there. A row whose history already ends with a stop sequence generates
    nothing.
    """
    cfg = model.cfg
    batch = tf.shape(lengths)[0]
    # Keep each row's last `keep` tokens, left-padded to a common length P.
    width = tf.maximum(tf.reduce_max(keep), 1)
    dense = ids.to_tensor(default_value=0)
    cols = lengths[:, None] - keep[:, None] + tf.range(width)[None, :] - (width - keep[:, None])
    valid = cols >= lengths[:, None] - keep[:, None]
    tokens = tf.where(valid, tf.gather(dense, tf.maximum(cols, 0), batch_dims=1), 0)
    pad = width - keep
    positions = tf.maximum(tf.range(width)[None, :] - pad[:, None], 0)

    q_idx = tf.range(width)[None, :, None]
    k_idx = tf.range(width)[None, None, :]
    see = ((k_idx <= q_idx) & (k_idx >= pad[:, None, None])) | (k_idx == q_idx)
    bias = tf.where(see, 0.0, NEG_INF)
    steps = tf.maximum(tf.reduce_max(budget), 0)
    logits, keys_values = model.prefill(tokens, positions, bias)
    cache = model.new_cache(keys_values, steps)
    # A decode step attends over the whole cache: rows before a row's padding or after the
    # current one are masked (the latter are still zeros).
    k_pos = tf.range(width + steps)[None, None, None, :]
    pad_bias = tf.where(k_pos >= pad[:, None, None, None], 0.0, NEG_INF)  # [B, 1, 1, T]

    def decode(endings: bool) -> Decoded:
        """Select and decode until every row is done. `endings`: the loop that also checks stop
        sequences and bans end-of-text where asked; a batch that uses neither runs the plain
        loop, so a request without them pays none of their per-step ops."""
        eot_bias = None
        if endings and params.ignore_eos is not None:
            eot_bias = sampling.eot_ban(params.ignore_eos, cfg.vocab_size)

        def select(logits, i):
            step = i if offset is None else offset + i
            return sampling.select(
                logits, params.temperature, params.top_k, params.top_p, params.seed, step, eot_bias
            )

        def record(i, token, nll, done, stopped, n_out, nll_sum, n_scored, out, *ends):
            """Book one selected token per row: emitted, stopped, scored, or ignored once done.
            `ends` (the `endings` loop): each row's last bytes and the stop slot that ended it."""
            live = tf.logical_not(done)
            is_eot = tf.equal(token, EOT_ID)
            nll_sum += tf.where(live, nll, 0.0)
            n_scored += tf.cast(live, tf.int32)
            stopped = stopped | (live & is_eot)
            emitted = live & tf.logical_not(is_eot)
            n_out += tf.cast(emitted, tf.int32)
            out = out.write(i, tf.where(emitted, token, 0))
            done = done | is_eot | (n_out >= budget)
            if endings:
                history, stop_index = ends
                history = stops.push(history, token, emitted)
                hit = tf.where(emitted, stops.match(ending.stops, history), NO_STOP)
                stop_index = tf.where(hit >= 0, hit, stop_index)
                stopped, done = stopped | (hit >= 0), done | (hit >= 0)
                ends = (history, stop_index)
            return (done, stopped, n_out, nll_sum, n_scored, out, *ends)

        # Step 0 selects from the prefill's logits; each loop iteration decodes the last token
        # and selects the next, so no step is computed that nothing reads.
        zeros_f = tf.zeros([batch])
        zeros_i = tf.zeros([batch], tf.int32)
        # At least one slot: step 0 is booked even when no row may generate (all rows done).
        out = tf.TensorArray(
            tf.int32, size=tf.maximum(steps, 1), element_shape=tf.TensorShape([None])
        )
        token, nll = select(logits, 0)
        ends: tuple[Any, ...] = ()
        done, stopped = budget <= 0, tf.zeros([batch], tf.bool)
        if endings:  # a row whose bytes already end with a stop sequence generates nothing
            ended = stops.match(ending.stops, ending.history)
            done, stopped, ends = done | (ended >= 0), ended >= 0, (ending.history, ended)
        state = record(0, token, nll, done, stopped, zeros_i, zeros_f, zeros_i, out, *ends)

        def cond(i, token, cache, done, *_):
            return (i + 1 < steps) & tf.logical_not(tf.reduce_all(done))

        def body(i, token, cache, *state):
            t = width + i
            pos = tf.minimum(t - pad, cfg.context - 1)
            step_bias = tf.where(k_pos <= t, pad_bias, NEG_INF)
            logits, cache = model.decode(token, pos, t, step_bias, cache)
            token, nll = select(logits, i + 1)
            return (i + 1, token, cache, *record(i + 1, token, nll, *state))

        loop = tf.while_loop(cond, body, (0, token, cache, *state), maximum_iterations=cfg.context)
        _, stopped, n_out, nll_sum, n_scored, out = loop[3:9]
        stop_index = loop[10] if endings else tf.fill([batch], NO_STOP)
        generated = tf.transpose(out.stack())[:, :steps]  # [B, steps]
        # Emitted tokens are contiguous from column 0: a row stops emitting once it is done.
        generated = tf.reshape(generated, [batch, steps])
        return Decoded(generated, n_out, stopped, nll_sum, n_scored, stop_index)

    active = ending.stops.any()
    if params.ignore_eos is not None:
        active = active | tf.reduce_any(params.ignore_eos != 0)
    return tf.cond(active, lambda: decode(True), lambda: decode(False))


def prompt_counts(keep: tf.Tensor, dropped: tf.Tensor, lengths: tf.Tensor) -> dict[str, tf.Tensor]:
    """`prompt_tokens` and `truncated_prompt_tokens`: prompt bytes seen and dropped (no BOS)."""
    seen = keep - tf.cast(dropped == 0, tf.int32)  # BOS is kept only when nothing is dropped
    return {"prompt_tokens": seen, "truncated_prompt_tokens": lengths - 1 - seen}


class Generator(tf.Module):
    """Wraps a trained GPT with the signatures that TF Serving calls."""

    def __init__(self, model: GPT) -> None:
        super().__init__(name="generator")
        self.model = model

    @tf.function(input_signature=list(SERVING_SPECS.values()))
    def serve(self, prompt, max_new_tokens, temperature, top_k, top_p, seed, stop, ignore_eos):
        """The `serving_default` signature: one row per prompt, every input batched on dim 0.

        An empty batch answers empty outputs, as a TF Serving model that accepts batch 0 does.
        """
        params = Sampling(temperature, top_k, top_p, seed, ignore_eos)
        return tf.cond(
            tf.size(prompt) > 0,
            lambda: self.generate(prompt, max_new_tokens, params, stop),
            _empty_outputs,
        )

    @tf.function(input_signature=list(continuation.CONTINUE_SPECS.values()))
    def continue_chunk(
        self,
        prompt,
        generated,
        step,
        chunk,
        max_new_tokens,
        temperature,
        top_k,
        top_p,
        seed,
        stop,
        ignore_eos,
    ):
        """The `continue` signature: the next `chunk` tokens of each row (empty batch: empty)."""
        params = Sampling(temperature, top_k, top_p, seed, ignore_eos)
        return tf.cond(
            tf.size(prompt) > 0,
            lambda: self.next_chunk(prompt, generated, step, chunk, max_new_tokens, params, stop),
            continuation.empty_outputs,
        )

    def generate(self, prompt, max_new_tokens, params: Sampling, stop):
        """Graph body of `serve` (also traced by tests and the benchmark)."""
        ids, lengths = prompt_ids(prompt)
        keep, dropped, allowed = _budgets(self.model.cfg, lengths, max_new_tokens)
        parsed = stops.parse(stop)
        ending = Ending(parsed, stops.empty_history(tf.shape(prompt)[0], parsed.width))
        out = generate_loop(self.model, ids, lengths, keep, allowed, params, ending)
        finish = tf.where(out.stopped, tf.constant(FINISH_STOP), tf.constant(FINISH_LENGTH))
        # the text leaves out the stop sequence that ended the row (all of it: unary has it all)
        shown = out.n_out - stops.cut_lengths(parsed, out.stop_index)
        return {
            "text": tokenizer.decode(out.tokens, shown),
            "output_tokens": out.n_out,
            "finish_reason": finish,
            "mean_nll": tf.math.divide_no_nan(out.nll_sum, tf.cast(out.n_scored, tf.float32)),
            "stop_index": out.stop_index,
            **prompt_counts(keep, dropped, lengths),
        }

    def next_chunk(self, prompt, generated, step, chunk, max_new_tokens, params: Sampling, stop):
        """Graph body of `continue_chunk`: the window `generate` uses, resumed at `step`."""
        cfg = self.model.cfg
        ids, lengths = prompt_ids(prompt)
        keep, dropped, allowed = _budgets(cfg, lengths, max_new_tokens)
        counts = prompt_counts(keep, dropped, lengths)
        parsed = stops.parse(stop)
        ending = Ending(parsed, stops.history_of(tokenizer.encode_bytes(generated), parsed.width))
        ids, total, seen, budget = continuation.resume(
            cfg, ids, keep, allowed, generated, step, chunk
        )
        out = generate_loop(self.model, ids, total, seen, budget, params, ending, offset=step)
        return continuation.chunk_outputs(*out, step, allowed, counts)
