"""The GPT-2 family of keras_hub (`GPT2CausalLM`) behind our `Decoder` protocol and `Vocab`.

The weights run through keras_hub's own layers (token and position embeddings, each
`TransformerDecoder` block's norms, projections, attention and feed-forward, the final norm,
the tied output projection), the way `GPT2CausalLM.call_with_cache` runs them, driven by
`cached.CachedDecoder` (per-row positions and masks, keys and values written with a core op). The
tokenizer is the preset's byte-level BPE (`GPT2Tokenizer`, `bpe.py`), run in the graph.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from serving.model.hub import bpe
from serving.model.hub.cached import CachedDecoder, Write
from serving.model.vocab import Vocab

FAMILY = "gpt2"
TASK_CLASS = "GPT2CausalLM"


class GPT2Decoder(CachedDecoder):
    """keras_hub GPT-2's layers: learned positions, pre-norm `TransformerDecoder` blocks."""

    def __init__(self, backbone: Any) -> None:
        super().__init__(backbone, int(backbone.max_sequence_length), "gpt2")

    def _embed(self, ids: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
        b = self.backbone
        table = tf.convert_to_tensor(b.position_embedding.position_embeddings)
        return b.embeddings_add((b.token_embedding(ids), tf.gather(table, positions)))

    def _block(
        self, layer: Any, x: tf.Tensor, positions: tf.Tensor, mask: tf.Tensor, write: Write
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """One pre-norm `TransformerDecoder` block as its `call` runs it at inference (the
        positions are in `x` already)."""
        attn = layer._self_attention_layer
        h = layer._self_attention_layer_norm(x)
        keys, values = write(attn._key_dense(h), attn._value_dense(h))
        out, _ = attn._compute_attention(
            query=attn._query_dense(h), key=keys, value=values, attention_mask=mask
        )
        x = x + attn._output_dense(out)
        h = layer._feedforward_intermediate_dense(layer._feedforward_layer_norm(x))
        return x + layer._feedforward_output_dense(h), [keys, values]

    def _logits(self, x: tf.Tensor) -> tf.Tensor:
        b = self.backbone
        return b.token_embedding(b.layer_norm(x), reverse=True)


def adapt(causal_lm: Any) -> tuple[GPT2Decoder, Vocab]:
    """A loaded `GPT2CausalLM` as (decoder, vocabulary)."""
    backbone = causal_lm.backbone
    return GPT2Decoder(backbone), bpe.vocab(causal_lm.preprocessor, int(backbone.vocabulary_size))
