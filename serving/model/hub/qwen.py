"""The Qwen family of keras_hub (`QwenCausalLM`, Qwen2-style) behind our `Decoder` and `Vocab`.

The weights run through keras_hub's own layers the way `QwenCausalLM.call_with_cache` runs
them (token embedding, each `QwenTransformerDecoder` block's RMS norms, query/key/value
projections, rotary embedding, grouped-query attention, SwiGLU feed-forward, the final norm and
the output projection), driven by `cached.CachedDecoder`. Two things differ from keras_hub's
path: the rotary embedding is given each row's own positions (keras_hub rotates by one shared
`start_index`, which left-padded rows cannot share), and the cache holds the grouped keys and
values (`num_key_value_heads`), repeated to the query heads only to attend, as keras_hub does.
The tokenizer is the preset's byte-level BPE (`QwenTokenizer`, `bpe.py`), run in the graph.
There is no position table: the window is the preset preprocessor's `sequence_length`.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from serving.model.hub import bpe
from serving.model.hub.cached import CachedDecoder, Write
from serving.model.hub.preset import PresetError
from serving.model.vocab import Vocab

FAMILY = "qwen"
TASK_CLASS = "QwenCausalLM"


class QwenDecoder(CachedDecoder):
    """keras_hub Qwen's layers: rotary positions, RMS-norm blocks, GQA, SwiGLU."""

    def __init__(self, backbone: Any, context: int) -> None:
        if backbone.use_sliding_window_attention and backbone.sliding_window_size < context:
            raise PresetError(
                f"sliding-window attention ({backbone.sliding_window_size} < the window "
                f"{context}) is not importable: keras_hub masks it from a shared cache index"
            )
        super().__init__(backbone, context, "qwen")

    def _embed(self, ids: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
        return self.backbone.token_embedding(ids)  # positions are rotary: in each block

    def _block(
        self, layer: Any, x: tf.Tensor, positions: tf.Tensor, mask: tf.Tensor, write: Write
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """One `QwenTransformerDecoder` block as its `call` runs it at inference."""
        attn = layer._self_attention_layer
        rotate = attn.rotary_embedding_layer
        h = layer._self_attention_layernorm(x)
        query = rotate(attn._query_dense(h), positions=positions)
        keys, values = write(rotate(attn._key_dense(h), positions=positions), attn._value_dense(h))
        groups = attn.num_key_value_groups
        out = attn._compute_attention(
            query, tf.repeat(keys, groups, axis=2), tf.repeat(values, groups, axis=2), mask
        )
        x = x + attn._output_dense(out)
        h = layer._feedforward_layernorm(x)
        gate = layer.activation(layer._feedforward_gate_dense(h))
        h = layer._feedforward_output_dense(layer._feedforward_intermediate_dense(h) * gate)
        return x + h, [keys, values]

    def _logits(self, x: tf.Tensor) -> tf.Tensor:
        b = self.backbone
        return b.token_embedding(b.layer_norm(x), reverse=True)


def adapt(causal_lm: Any) -> tuple[QwenDecoder, Vocab]:
    """A loaded `QwenCausalLM` as (decoder, vocabulary)."""
    backbone, preprocessor = causal_lm.backbone, causal_lm.preprocessor
    return QwenDecoder(backbone, int(preprocessor.sequence_length)), bpe.vocab(
        preprocessor, int(backbone.vocabulary_size)
    )
