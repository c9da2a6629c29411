"""GPT-2-layout decoder as a tf.Module: token + position embeddings, pre-norm blocks, tied output.

Two forward paths share the same weights: `logits` for training (full causal attention), and
generation: `prefill` reads the prompt and returns its keys and values, then `decode` feeds one
token per step against a per-layer KV cache laid out [B, K, T, Dh]. A step writes its row in
place (`TensorStridedSliceUpdate` reuses the cache's buffer) and attends with plain 2-D and
batched matmuls: on CPU a tiny `Einsum` costs several times a `MatMul`, and a decode step is
small enough that per-op overhead is most of its time.

Attention is grouped-query: K = `n_kv_heads` key/value heads, each read by G = H / K query
heads (query head h reads KV head h // G, as Llama's). A step's G queries of one KV head are the
rows of one matmul against that head's cache, so the cache is read once per KV head; it is
K / H the size of a multi-head one, which is what a step late in the window reads more of.
"""

from __future__ import annotations

import math

import tensorflow as tf

from serving.model.config import ModelConfig

NEG_INF = -1e9


class Block(tf.Module):
    """One pre-norm transformer block."""

    def __init__(self, cfg: ModelConfig, index: int, init_std: float) -> None:
        super().__init__(name=f"block_{index}")
        d, f = cfg.d_model, cfg.d_ff
        rnd = tf.random.normal
        out_std = init_std / math.sqrt(2 * cfg.n_layers)  # GPT-2's scaled residual init
        self.ln1_g = tf.Variable(tf.ones([d]), name="ln1_g")
        self.ln1_b = tf.Variable(tf.zeros([d]), name="ln1_b")
        qkv = d + 2 * cfg.kv_dim  # the queries, then the keys and values of the KV heads
        self.w_qkv = tf.Variable(rnd([d, qkv], stddev=init_std), name="w_qkv")
        self.b_qkv = tf.Variable(tf.zeros([qkv]), name="b_qkv")
        self.w_o = tf.Variable(rnd([d, d], stddev=out_std), name="w_o")
        self.b_o = tf.Variable(tf.zeros([d]), name="b_o")
        self.ln2_g = tf.Variable(tf.ones([d]), name="ln2_g")
        self.ln2_b = tf.Variable(tf.zeros([d]), name="ln2_b")
        self.w_fc = tf.Variable(rnd([d, f], stddev=init_std), name="w_fc")
        self.b_fc = tf.Variable(tf.zeros([f]), name="b_fc")
        self.w_proj = tf.Variable(rnd([f, d], stddev=out_std), name="w_proj")
        self.b_proj = tf.Variable(tf.zeros([d]), name="b_proj")


def write_row(
    cache: tf.Tensor, value: tf.Tensor, begin: tf.Tensor, end: tf.Tensor, axis: int = 2
) -> tf.Tensor:
    """cache[:, :, row] = value [B, H, 1, Dh] (the row on `axis` of a rank-4 cache); in place
    when nothing else holds the cache. A core op: XLA's dynamic update slice is not servable."""
    mask = 0b1111 ^ (1 << axis)  # every other dimension whole: only the row is chosen
    return tf.raw_ops.TensorStridedSliceUpdate(
        input=cache,
        begin=begin,
        end=end,
        strides=tf.ones([4], tf.int32),
        value=value,
        begin_mask=mask,
        end_mask=mask,
    )


def layer_norm(x: tf.Tensor, g: tf.Variable, b: tf.Variable) -> tf.Tensor:
    """LayerNorm over the last axis (eps as GPT-2)."""
    mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-5) * g + b


class GPT(tf.Module):
    """The decoder's weights and its two forward paths."""

    def __init__(self, cfg: ModelConfig, seed: int = 0) -> None:
        super().__init__(name="gpt")
        self.cfg = cfg
        tf.random.set_seed(seed)
        std = 0.02
        self.wte = tf.Variable(
            tf.random.normal([cfg.vocab_size, cfg.d_model], stddev=std), name="wte"
        )
        self.wpe = tf.Variable(
            tf.random.normal([cfg.context, cfg.d_model], stddev=0.01), name="wpe"
        )
        self.blocks = [Block(cfg, i, std) for i in range(cfg.n_layers)]
        self.lnf_g = tf.Variable(tf.ones([cfg.d_model]), name="lnf_g")
        self.lnf_b = tf.Variable(tf.zeros([cfg.d_model]), name="lnf_b")

    def assign_from(self, other: GPT) -> None:
        """Copy every weight from a model of the same shape."""
        for dst, src in zip(self.trainable_variables, other.trainable_variables, strict=True):
            dst.assign(src)

    # -- shared pieces -------------------------------------------------------------------
    def _embed(self, ids: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
        return tf.gather(self.wte, ids) + tf.gather(self.wpe, positions)

    def _qkv(self, blk: Block, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """x [B, S, D] -> q [S, B, K, G, Dh], k and v each [S, B, K, Dh]."""
        cfg = self.cfg
        h = layer_norm(x, blk.ln1_g, blk.ln1_b)
        qkv = tf.einsum("bsd,de->bse", h, blk.w_qkv) + blk.b_qkv
        qkv = tf.transpose(qkv, [1, 0, 2])  # [S, B, D + 2 K Dh]
        q, kv = tf.split(qkv, [cfg.d_model, 2 * cfg.kv_dim], axis=-1)
        shape = tf.shape(x)
        q = tf.reshape(q, [shape[1], shape[0], cfg.n_kv_heads, cfg.groups, cfg.head_dim])
        kv = tf.reshape(kv, [shape[1], shape[0], 2, cfg.n_kv_heads, cfg.head_dim])
        return q, kv[:, :, 0], kv[:, :, 1]

    def _attend(self, q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
        """q [S, B, K, G, Dh] over k, v [T, B, K, Dh] with additive bias [B, S, T] -> [B, S, D]."""
        scores = tf.einsum("sbkgd,tbkd->bkgst", q, k) / math.sqrt(self.cfg.head_dim)
        weights = tf.nn.softmax(scores + bias[:, None, None, :, :], axis=-1)
        out = tf.einsum("bkgst,tbkd->bskgd", weights, v)
        shape = tf.shape(out)
        return tf.reshape(out, [shape[0], shape[1], self.cfg.d_model])

    def _finish_block(self, blk: Block, x: tf.Tensor, attn: tf.Tensor) -> tf.Tensor:
        x = x + tf.einsum("bsd,de->bse", attn, blk.w_o) + blk.b_o
        h = layer_norm(x, blk.ln2_g, blk.ln2_b)
        h = tf.nn.gelu(tf.einsum("bsd,df->bsf", h, blk.w_fc) + blk.b_fc, approximate=True)
        return x + tf.einsum("bsf,fd->bsd", h, blk.w_proj) + blk.b_proj

    def _head(self, x: tf.Tensor) -> tf.Tensor:
        """Tied output projection: hidden states -> logits over the vocabulary."""
        h = layer_norm(x, self.lnf_g, self.lnf_b)
        return tf.einsum("...d,vd->...v", h, self.wte)

    # -- training path -------------------------------------------------------------------
    def logits(self, ids: tf.Tensor) -> tf.Tensor:
        """ids [B, S] -> logits [B, S, V] with causal attention (training and scoring)."""
        seq = tf.shape(ids)[1]
        x = self._embed(ids, tf.range(seq)[None, :])
        causal = tf.linalg.band_part(tf.ones([seq, seq]), -1, 0)
        bias = tf.tile(((1.0 - causal) * NEG_INF)[None], [tf.shape(ids)[0], 1, 1])
        for blk in self.blocks:
            q, k, v = self._qkv(blk, x)
            x = self._finish_block(blk, x, self._attend(q, k, v, bias))
        return self._head(x)

    # -- generation path -----------------------------------------------------------------
    def prefill(
        self, ids: tf.Tensor, positions: tf.Tensor, bias: tf.Tensor
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """Feed prompts ids [B, S] with bias [B, S, S] -> (last logits [B, V], K and V per layer).

        Keys and values come two per layer, each [S, B, K, Dh]; `new_cache` lays them out.
        """
        x = self._embed(ids, positions)
        keys_values = []
        for blk in self.blocks:
            q, k, v = self._qkv(blk, x)
            keys_values += [k, v]
            x = self._finish_block(blk, x, self._attend(q, k, v, bias))
        return self._head(x[:, -1, :]), keys_values

    @staticmethod
    def new_cache(keys_values: list[tf.Tensor], room: tf.Tensor) -> list[tf.Tensor]:
        """Prefill keys and values [S, B, K, Dh] -> caches [B, K, S + room, Dh], zeros after S."""
        padding = [[0, 0], [0, 0], [0, room], [0, 0]]
        return [tf.pad(tf.transpose(kv, [1, 2, 0, 3]), padding) for kv in keys_values]

    def decode(
        self,
        token: tf.Tensor,
        position: tf.Tensor,
        row: tf.Tensor,
        bias: tf.Tensor,
        cache: list[tf.Tensor],
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """Feed one token [B] at `position` [B] into cache row `row`; bias [B, 1, 1, T].

        Returns the logits [B, V] and the caches with that row written. Same arithmetic, in
        the same order, as the prefill path, with 2-D matmuls in place of the einsums.
        """
        cfg = self.cfg
        x = tf.gather(self.wte, token) + tf.gather(self.wpe, position)  # [B, D]
        begin = tf.stack([0, 0, row, 0])
        end = begin + 1
        scale = math.sqrt(cfg.head_dim)
        new_cache = []
        for i, blk in enumerate(self.blocks):
            h = layer_norm(x, blk.ln1_g, blk.ln1_b)
            qkv = tf.matmul(h, blk.w_qkv) + blk.b_qkv
            # [B, D + 2 K Dh] -> q [B, K, G, Dh] (a KV head's G query heads as the rows of one
            # matmul), k and v [B, K, 1, Dh] of the one new position
            if cfg.groups == 1:  # multi-head: one reshape and an unstack, the fewest kernels
                q, k, v = tf.unstack(tf.reshape(qkv, [-1, 3, cfg.n_heads, 1, cfg.head_dim]), axis=1)
            else:
                heads = tf.reshape(qkv, [-1, cfg.n_heads + 2 * cfg.n_kv_heads, 1, cfg.head_dim])
                q, k, v = tf.split(heads, [cfg.n_heads, cfg.n_kv_heads, cfg.n_kv_heads], axis=1)
                q = tf.reshape(q, [-1, cfg.n_kv_heads, cfg.groups, cfg.head_dim])
            k_cache = write_row(cache[2 * i], k, begin, end)
            v_cache = write_row(cache[2 * i + 1], v, begin, end)
            new_cache += [k_cache, v_cache]
            scores = tf.matmul(q, k_cache, transpose_b=True) / scale  # [B, K, G, T]
            attn = tf.matmul(tf.nn.softmax(scores + bias, axis=-1), v_cache)  # [B, K, G, Dh]
            x = x + tf.matmul(tf.reshape(attn, [-1, cfg.d_model]), blk.w_o) + blk.b_o
            h = layer_norm(x, blk.ln2_g, blk.ln2_b)
            h = tf.nn.gelu(tf.matmul(h, blk.w_fc) + blk.b_fc, approximate=True)
            x = x + tf.matmul(h, blk.w_proj) + blk.b_proj
        h = layer_norm(x, self.lnf_g, self.lnf_b)
        return tf.matmul(h, self.wte, transpose_b=True), new_cache
