"""The decoder's two forward paths, and grouped-query attention against its multi-head meaning."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from serving.model.config import ModelConfig, get_preset

TINY = get_preset("tiny").model
# (query heads, KV heads): multi-head as `tiny`, grouped as Llama 2 / Mistral, multi-query
ATTENTION = [(2, 2), (4, 2), (4, 1)]


def attention(heads: int, kv_heads: int) -> ModelConfig:
    return dataclasses.replace(TINY, n_heads=heads, n_kv_heads=kv_heads)


@pytest.mark.parametrize(("heads", "kv_heads"), ATTENTION)
def test_cached_decode_steps_match_the_full_forward_pass(heads: int, kv_heads: int) -> None:
    import tensorflow as tf

    from serving.model.transformer import GPT

    cfg = attention(heads, kv_heads)
    model = GPT(cfg, seed=3)
    ids = tf.constant([[256, 72, 101, 108, 108, 111, 32, 119], [256, 40, 41, 42, 43, 44, 45, 46]])
    full = model.logits(ids).numpy()  # [B, S, V]
    prompt = 3
    positions = tf.range(prompt)[None, :] * tf.ones([2, 1], tf.int32)
    causal = tf.linalg.band_part(tf.ones([prompt, prompt]), -1, 0)
    bias = tf.tile(((1.0 - causal) * -1e9)[None], [2, 1, 1])
    logits, keys_values = model.prefill(ids[:, :prompt], positions, bias)
    np.testing.assert_allclose(logits.numpy(), full[:, prompt - 1], atol=1e-4)
    length = ids.shape[1]
    cache = model.new_cache(keys_values, length - prompt)
    for t in range(prompt, length):
        step_bias = tf.where(tf.range(length) <= t, 0.0, -1e9)[None, None, None, :]
        step_bias = tf.tile(step_bias, [2, 1, 1, 1])
        logits, cache = model.decode(ids[:, t], tf.fill([2], t), t, step_bias, cache)
        np.testing.assert_allclose(logits.numpy(), full[:, t], atol=1e-4)
    # the cache holds the KV heads only: what a late step reads is K / H of multi-head's
    assert all(c.shape == (2, kv_heads, length, cfg.head_dim) for c in cache)


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 2), (4, 1)])
def test_query_head_h_reads_kv_head_h_over_groups_as_a_repeated_multi_head_model(
    heads: int, kv_heads: int
) -> None:
    """Grouped-query attention is multi-head attention whose heads share keys and values in
    consecutive groups (Llama's `repeat_kv`, keras_hub's `repeat`): a multi-head model given
    each KV head's projection G times over gives the same logits, on both paths."""
    import tensorflow as tf

    from serving.model.transformer import GPT

    grouped = GPT(attention(heads, kv_heads), seed=5)
    full = GPT(attention(heads, heads), seed=9)
    d, dh, groups = TINY.d_model, TINY.d_model // heads, heads // kv_heads

    def repeat_kv(value: np.ndarray) -> np.ndarray:
        """Columns [q | k | v] of the KV heads -> [q | k | v] with each KV head G times over."""
        q, kv = value[..., :d], value[..., d:]
        k, v = (
            np.concatenate([h for h in np.split(m, kv_heads, axis=-1) for _ in range(groups)], -1)
            for m in np.split(kv, 2, axis=-1)
        )
        assert k.shape[-1] == d and k.shape[-1] // dh == heads
        return np.concatenate([q, k, v], axis=-1)

    for src, dst in zip(grouped.trainable_variables, full.trainable_variables, strict=True):
        # only w_qkv and b_qkv differ in shape; every other weight is copied as it is
        dst.assign(repeat_kv(src.numpy()) if src.shape != dst.shape else src)
    ids = tf.constant([[256, 84, 111, 107, 101, 110, 80, 117, 108, 115, 101]])
    np.testing.assert_allclose(grouped.logits(ids).numpy(), full.logits(ids).numpy(), atol=1e-4)
    length = ids.shape[1]
    first = (ids[:, :1], tf.zeros([1, 1], tf.int32), tf.zeros([1, 1, 1]))
    caches = [m.new_cache(m.prefill(*first)[1], length - 1) for m in (grouped, full)]
    for t in range(1, length):
        bias = tf.where(tf.range(length) <= t, 0.0, -1e9)[None, None, None, :]
        steps = [m.decode(ids[:, t], tf.fill([1], t), t, bias, c)
                 for m, c in zip((grouped, full), caches, strict=True)]  # fmt: skip
        np.testing.assert_allclose(steps[0][0].numpy(), steps[1][0].numpy(), atol=1e-4)
        caches = [s[1] for s in steps]


def test_grouped_attention_has_fewer_key_value_weights() -> None:
    from serving.model.transformer import GPT

    d = TINY.d_model
    assert GPT(attention(4, 1)).blocks[0].w_qkv.shape == (d, d + 2 * d // 4)
    assert GPT(attention(4, 4)).blocks[0].w_qkv.shape == (d, 3 * d)


@pytest.mark.parametrize("kv_heads", [0, 3, -1])
def test_kv_heads_must_divide_the_query_heads(kv_heads: int) -> None:
    with pytest.raises(ValueError, match="n_kv_heads"):
        attention(4, kv_heads)
