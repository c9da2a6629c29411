"""The two signatures every exported model answers: `serving_default` and `continue`.

Both run the shared loop (`decoding.py`) over the model's own tokens (`vocab.py`): our model's
subword vocabulary (`tokenizer.bpe_vocab`), an imported one's (`serving/model/hub/`), or bytes
(`tokenizer.byte_vocab`). `continue` (streaming, `continuation.py`) re-reads the prompt and the
tokens generated so far (the caller's ids, or a byte model's bytes) and runs the same loop from
that step on.
"""

from __future__ import annotations

import tensorflow as tf

from serving.model import continuation, stops
from serving.model.decoding import (
    Decoded,
    Decoder,
    Ending,
    Sampling,
    generate_loop,
)
from serving.model.vocab import Vocab, encode_bytes, sanitize_utf8
from tokenpulse.tfserving.signature import FINISH_LENGTH, FINISH_STOP

__all__ = ["Decoded", "Ending", "Generator", "SERVING_SPECS", "Sampling", "generate_loop"]

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


def _budgets(context: int, lengths: tf.Tensor, max_new: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """Fit each row into the window: (kept prompt length, dropped prompt tokens, new-token cap)."""
    wanted = tf.clip_by_value(max_new, 0, context - 1)
    # A long prompt keeps its end and leaves room for the request, up to half the window.
    room = tf.minimum(tf.maximum(wanted, 1), context // 2)
    keep = tf.minimum(lengths, context - room)
    allowed = tf.minimum(wanted, context - keep)
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


def prompt_ids(prompt: tf.Tensor, vocab: Vocab) -> tuple[tf.RaggedTensor, tf.Tensor, tf.Tensor]:
    """[B] prompts -> (ragged ids, [B] lengths, [B] leading ids that are no prompt text).

    End-of-text doubles as beginning-of-text: before every prompt where the vocabulary's
    preprocessor puts it (`Vocab.starts`), else before a blank prompt only.
    """
    ids = vocab.encode(sanitize_utf8(prompt))
    if vocab.starts:
        lead = tf.ones([tf.shape(prompt)[0]], tf.int32)
        bos = tf.fill([tf.shape(prompt)[0], 1], vocab.eot_id)
    else:
        lead = tf.cast(ids.row_lengths() == 0, tf.int32)
        bos = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(lead)], vocab.eot_id), tf.cast(lead, ids.row_splits.dtype)
        )
    ids = tf.concat([bos, ids], axis=1)
    return ids, tf.cast(ids.row_lengths(), tf.int32), lead


def prompt_counts(
    keep: tf.Tensor, dropped: tf.Tensor, lengths: tf.Tensor, lead: tf.Tensor
) -> dict[str, tf.Tensor]:
    """`prompt_tokens` and `truncated_prompt_tokens`: prompt tokens seen and dropped (not the
    `lead` ids before the prompt, which are kept only when nothing is dropped)."""
    seen = keep - tf.where(dropped == 0, lead, 0)
    return {"prompt_tokens": seen, "truncated_prompt_tokens": lengths - lead - seen}


class Generator(tf.Module):
    """Wraps a causal LM and its vocabulary with the signatures that TF Serving calls.

    Both signatures are traced without autograph: their graph code writes its loops and branches
    as tf.while_loop and tf.cond, so there is nothing to convert, and converting it anyway (some
    200 functions, each parsed and rewritten) was most of a trace: 14.9 CPU-s for the two
    signatures of the tiny preset against 6.5 without, with the same outputs. Every
    export, import and bench pays a trace. A Python `if` or `for` on a tensor therefore fails at
    trace time instead of being turned into graph ops: write it as tf.cond or tf.while_loop.
    """

    def __init__(self, model: Decoder, vocab: Vocab) -> None:
        super().__init__(name="generator")
        self.model = model
        self.vocab = vocab
        self.encoder = vocab.module  # tracked, so the tokenizer's tables are saved with it

    @tf.function(input_signature=list(SERVING_SPECS.values()), autograph=False)
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

    @tf.function(input_signature=list(continuation.CONTINUE_SPECS.values()), autograph=False)
    def continue_chunk(
        self,
        prompt,
        generated,
        generated_ids,
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
            lambda: self.next_chunk(
                prompt, generated, generated_ids, step, chunk, max_new_tokens, params, stop
            ),
            continuation.empty_outputs,
        )

    def _ending(self, stop: tf.Tensor, generated: tf.Tensor | None = None) -> Ending:
        """The rows' stop sequences and the history the bytes generated so far leave."""
        parsed = stops.parse(stop)
        width = stops.history_width(parsed, self.vocab.max_bytes)
        if generated is None:
            return Ending(parsed, stops.empty_history(tf.shape(stop)[0], width))
        return Ending(parsed, stops.history_of(encode_bytes(generated), width))

    def generate(self, prompt, max_new_tokens, params: Sampling, stop):
        """Graph body of `serve` (also traced by tests and the benchmark)."""
        ids, lengths, lead = prompt_ids(prompt, self.vocab)
        keep, dropped, allowed = _budgets(self.model.cfg.context, lengths, max_new_tokens)
        ending = self._ending(stop)
        out = generate_loop(self.model, self.vocab, ids, lengths, keep, allowed, params, ending)
        finish = tf.where(out.stopped, tf.constant(FINISH_STOP), tf.constant(FINISH_LENGTH))
        # the text leaves out the stop sequence that ended the row (all of it: unary has it all)
        hit = stops.Hit(out.stop_index, out.tail)
        return {
            "text": self.vocab.text(out.tokens, stops.cut_lengths(ending.stops, hit)),
            "output_tokens": out.n_out,
            "finish_reason": finish,
            "mean_nll": tf.math.divide_no_nan(out.nll_sum, tf.cast(out.n_scored, tf.float32)),
            "stop_index": out.stop_index,
            **prompt_counts(keep, dropped, lengths, lead),
        }

    def next_chunk(
        self, prompt, generated, generated_ids, step, chunk, max_new_tokens, params: Sampling, stop
    ):
        """Graph body of `continue_chunk`: the window `generate` uses, resumed at `step`."""
        context, vocab = self.model.cfg.context, self.vocab
        ids, lengths, lead = prompt_ids(prompt, vocab)
        keep, dropped, allowed = _budgets(context, lengths, max_new_tokens)
        counts = prompt_counts(keep, dropped, lengths, lead)
        ending = self._ending(stop, generated)
        gen_ids = continuation.generated_tokens(vocab, generated, generated_ids)
        ids, total, seen, budget = continuation.resume(
            context, ids, keep, allowed, gen_ids, step, chunk
        )
        out = generate_loop(self.model, vocab, ids, total, seen, budget, params, ending, step)
        spent = tf.maximum(step, 0) + out.n_out >= allowed
        return continuation.chunk_outputs(vocab, out, spent, counts)
