"""Per-row next-token selection: greedy, temperature, top-k, top-p, with per-row seeds.

Randomness comes from a small counter-based generator keyed by (row seed, step), so a row's
sample never depends on which other rows share its batch (TF's stateless ops take one seed
per call, not one per row).
"""

from __future__ import annotations

import tensorflow as tf

_MOD = 2147483647  # 2^31 - 1: products below stay well inside int64


def row_uniform(seed: tf.Tensor, step: tf.Tensor) -> tf.Tensor:
    """[B] int64 seeds and a scalar step -> [B] float32 uniforms in (0, 1)."""
    m = tf.constant(_MOD, tf.int64)
    lo = tf.math.floormod(seed, m)
    hi = tf.math.floormod(tf.math.floordiv(seed, m), m)
    s = tf.cast(step, tf.int64) + 1
    x = tf.math.floormod(lo * 48271 + 1, m)
    x = tf.math.floormod(x + hi * 69621 + s * 40692, m)
    for _ in range(4):  # Park-Miller rounds with an xor-shift to spread the bits
        x = tf.math.floormod(x * 48271 + 11, m)
        x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 13))
    return tf.cast((tf.cast(x, tf.float64) + 0.5) / _MOD, tf.float32)


def select(
    logits: tf.Tensor,
    temperature: tf.Tensor,
    top_k: tf.Tensor,
    top_p: tf.Tensor,
    seed: tf.Tensor,
    step: tf.Tensor,
    eot_bias: tf.Tensor | None = None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """logits [B, V] -> (token [B] int32, nll [B]); nll is under the model's own distribution.

    `eot_bias` [B, V] (from `eot_ban`) is added to the logits a token is chosen from, not to
    those it is scored under: a row that ignores end-of-text never selects it, and its nll is
    still the model's, over the whole vocabulary.
    """
    # An all-greedy batch skips the sort, cumsums and random numbers (most of a step's ops);
    # both branches pick the same token for a greedy row.
    return tf.cond(
        tf.reduce_any(temperature > 0.0),
        lambda: _sample(logits, temperature, top_k, top_p, seed, step, eot_bias),
        lambda: _greedy(logits, eot_bias),
    )


def eot_ban(ignore_eos: tf.Tensor, vocab: int, end_ids: tuple[int, ...]) -> tf.Tensor:
    """[B] ignore_eos (!= 0: never select end-of-text, nor end-of-turn) -> the [B, V] bias
    `select` adds."""
    ids = tf.range(vocab)[None, :]
    is_end = tf.reduce_any(ids[:, :, None] == tf.constant(list(end_ids))[None, None, :], axis=2)
    return tf.where((ignore_eos != 0)[:, None] & is_end, -1e30, 0.0)


def _greedy(logits: tf.Tensor, eot_bias: tf.Tensor | None) -> tuple[tf.Tensor, tf.Tensor]:
    """The argmax token and its nll."""
    choose = logits if eot_bias is None else logits + eot_bias
    token = tf.argmax(choose, axis=-1, output_type=tf.int32)
    nll = -tf.gather(tf.nn.log_softmax(logits), token[:, None], batch_dims=1)[:, 0]
    return token, nll


def _sample(
    logits: tf.Tensor,
    temperature: tf.Tensor,
    top_k: tf.Tensor,
    top_p: tf.Tensor,
    seed: tf.Tensor,
    step: tf.Tensor,
    eot_bias: tf.Tensor | None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Sampled tokens for rows with temperature > 0, argmax for the others."""
    vocab = tf.shape(logits)[1]
    log_probs = tf.nn.log_softmax(logits)
    if eot_bias is not None:
        logits = logits + eot_bias  # -1e30 / temperature stays far below every real logit
    greedy = tf.argmax(logits, axis=-1, output_type=tf.int32)

    scaled = logits / tf.maximum(temperature, 1e-6)[:, None]
    sorted_logits, sorted_ids = tf.math.top_k(scaled, k=vocab)
    ranks = tf.range(vocab)[None, :]
    k = tf.where((top_k <= 0) | (top_k > vocab), vocab, top_k)
    sorted_logits = tf.where(ranks < k[:, None], sorted_logits, -1e9)
    probs = tf.nn.softmax(sorted_logits, axis=-1)
    before = tf.math.cumsum(probs, axis=-1, exclusive=True)
    probs = tf.where(before < tf.clip_by_value(top_p, 1e-6, 1.0)[:, None], probs, 0.0)
    cdf = tf.math.cumsum(probs, axis=-1)
    target = row_uniform(seed, step) * cdf[:, -1]
    choice = tf.reduce_sum(tf.cast(cdf < target[:, None], tf.int32), axis=-1)
    choice = tf.minimum(choice, vocab - 1)
    sampled = tf.gather(sorted_ids, choice[:, None], batch_dims=1)[:, 0]

    token = tf.where(temperature <= 0.0, greedy, sampled)
    nll = -tf.gather(log_probs, token[:, None], batch_dims=1)[:, 0]
    return token, nll
