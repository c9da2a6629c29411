"""The in-graph decoding loop every exported model runs: prefill, then select and decode per row.

Prompts are left-padded so every row writes the same cache row at each step; each row keeps its
own positions, mask, sampling parameters and stopping rule, so its output does not depend on
the rest of the batch. A row is done at end-of-text or end-of-turn (unless it ignores them), at
its budget, or when its bytes contain one of its stop sequences (`stops.py`); the loop ends
when every row is done, so a stopped batch costs the steps it used. The model is anything with
`cfg.context`, `prefill`, `new_cache` and `decode` (`Decoder`); its tokens are described by a
`Vocab`.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import tensorflow as tf

from serving.model import sampling, stops
from serving.model.transformer import NEG_INF
from serving.model.vocab import Vocab
from tokenpulse.tfserving.signature import NO_STOP

NO_TOKEN = -1  # a step that wrote no token of the row (it was done)


class Window(Protocol):
    """The one fact of a model's config the loop reads."""

    context: int


class Decoder(Protocol):
    """A causal LM with a KV cache, driven one step at a time (see `transformer.GPT`)."""

    cfg: Window

    def prefill(self, ids: tf.Tensor, positions: tf.Tensor, bias: tf.Tensor) -> tuple[Any, Any]:
        """ids [B, S], positions [B, S], bias [B, S, S] -> (last logits [B, V], keys/values)."""

    def new_cache(self, keys_values: Any, room: tf.Tensor) -> Any:
        """The prefill's keys and values with room for `room` more positions."""

    def decode(self, token, position, row, bias, cache) -> tuple[Any, Any]:
        """One token [B] at `position` [B] into cache row `row`; bias [B, 1, 1, T]."""


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
    history: tf.Tensor  # [B, W] the last W bytes the row generated before this call


class Decoded(NamedTuple):
    """What the loop produced per row: tokens [B, steps] (NO_TOKEN where none was booked)."""

    tokens: tf.Tensor
    n_out: tf.Tensor  # tokens emitted
    stopped: tf.Tensor
    nll_sum: tf.Tensor
    n_scored: tf.Tensor
    stop_index: tf.Tensor  # [B] the stop slot that ended the row, NO_STOP for none
    tail: tf.Tensor  # [B] bytes of the last token after the stop sequence that ended the row


def _left_padded(ids: tf.RaggedTensor, lengths: tf.Tensor, keep: tf.Tensor) -> tuple:
    """Each row's last `keep` ids left-padded to a common width: (tokens, positions, pad)."""
    width = tf.maximum(tf.reduce_max(keep), 1)
    dense = ids.to_tensor(default_value=0)
    cols = lengths[:, None] - keep[:, None] + tf.range(width)[None, :] - (width - keep[:, None])
    valid = cols >= lengths[:, None] - keep[:, None]
    tokens = tf.where(valid, tf.gather(dense, tf.maximum(cols, 0), batch_dims=1), 0)
    pad = width - keep
    positions = tf.maximum(tf.range(width)[None, :] - pad[:, None], 0)
    return tokens, positions, pad


def generate_loop(
    model: Decoder,
    vocab: Vocab,
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
    context = model.cfg.context
    batch = tf.shape(lengths)[0]
    tokens, positions, pad = _left_padded(ids, lengths, keep)
    width = tf.shape(tokens)[1]
    q_idx = tf.range(width)[None, :, None]
    k_idx = tf.range(width)[None, None, :]
    see = ((k_idx <= q_idx) & (k_idx >= pad[:, None, None])) | (k_idx == q_idx)
    steps = tf.maximum(tf.reduce_max(budget), 0)
    logits, keys_values = model.prefill(tokens, positions, tf.where(see, 0.0, NEG_INF))
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
            eot_bias = sampling.eot_ban(params.ignore_eos, vocab.size, vocab.end_ids)
        table = vocab.token_bytes() if endings else None  # [V, M]: only to match stops

        def select(logits, i):
            step = i if offset is None else offset + i
            return sampling.select(
                logits, params.temperature, params.top_k, params.top_p, params.seed, step, eot_bias
            )

        def record(i, token, nll, s: dict[str, Any]) -> dict[str, Any]:
            """Book one selected token per row: emitted, stopped, scored, or ignored once done."""
            s = dict(s)
            live = tf.logical_not(s["done"])
            is_eot = vocab.is_end(token)  # end-of-text, or end-of-turn
            emitted = live & tf.logical_not(is_eot)
            s["nll_sum"] += tf.where(live, nll, 0.0)
            s["n_scored"] += tf.cast(live, tf.int32)
            s["stopped"] = s["stopped"] | (live & is_eot)
            s["n_out"] += tf.cast(emitted, tf.int32)
            s["out"] = s["out"].write(i, tf.where(emitted, token, NO_TOKEN))
            done = s["done"] | is_eot | (s["n_out"] >= budget)
            if endings and table is not None:
                s["history"], pushed = stops.push(s["history"], token, emitted, table)
                hit = stops.match(ending.stops, s["history"], pushed)
                ended = hit.index >= 0
                s["stop_index"] = tf.where(ended, hit.index, s["stop_index"])
                s["tail"] = tf.where(ended, hit.tail, s["tail"])
                s["stopped"], done = s["stopped"] | ended, done | ended
            s["done"] = done
            return s

        # Step 0 selects from the prefill's logits; each loop iteration decodes the last token
        # and selects the next, so no step is computed that nothing reads.
        zeros_i = tf.zeros([batch], tf.int32)
        # At least one slot: step 0 is booked even when no row may generate (all rows done).
        out = tf.TensorArray(
            tf.int32, size=tf.maximum(steps, 1), element_shape=tf.TensorShape([None])
        )
        s: dict[str, Any] = {"done": budget <= 0, "stopped": tf.zeros([batch], tf.bool),
                             "n_out": zeros_i, "nll_sum": tf.zeros([batch]),
                             "n_scored": zeros_i, "out": out}  # fmt: skip
        if endings:  # a row whose bytes already end with a stop sequence generates nothing
            ended = stops.match(ending.stops, ending.history, tf.ones([batch], tf.int32)).index
            s.update(done=s["done"] | (ended >= 0), stopped=ended >= 0)
            s.update(history=ending.history, stop_index=ended, tail=zeros_i)
        token, nll = select(logits, 0)
        s = record(0, token, nll, s)

        def cond(i, token, cache, s):
            return (i + 1 < steps) & tf.logical_not(tf.reduce_all(s["done"]))

        def body(i, token, cache, s):
            t = width + i
            pos = tf.minimum(t - pad, context - 1)
            step_bias = tf.where(k_pos <= t, pad_bias, NEG_INF)
            logits, cache = model.decode(token, pos, t, step_bias, cache)
            token, nll = select(logits, i + 1)
            return i + 1, token, cache, record(i + 1, token, nll, s)

        last, *_, s = tf.while_loop(cond, body, (0, token, cache, s), maximum_iterations=context)
        generated = tf.transpose(s["out"].stack())[:, :steps]  # [B, steps]
        # slots after the loop ended were never written (they read 0): no token there
        ran = tf.range(tf.shape(generated)[1])[None, :] <= last
        generated = tf.reshape(tf.where(ran, generated, NO_TOKEN), [batch, steps])
        stop_index = s["stop_index"] if endings else tf.fill([batch], NO_STOP)
        tail = s["tail"] if endings else zeros_i
        return Decoded(generated, s["n_out"], s["stopped"], s["nll_sum"], s["n_scored"],
                       stop_index, tail)  # fmt: skip

    active = ending.stops.any()
    if params.ignore_eos is not None:
        active = active | tf.reduce_any(params.ignore_eos != 0)
    return tf.cond(active, lambda: decode(True), lambda: decode(False))
