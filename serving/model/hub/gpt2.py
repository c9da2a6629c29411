"""The GPT-2 family of keras_hub (`GPT2CausalLM`) behind our `Decoder` protocol and `Vocab`.

The weights run through keras_hub's own layers (token and position embeddings, each
`TransformerDecoder` block's norms, projections, attention and feed-forward, the final norm,
the tied output projection), the way `GPT2CausalLM.call_with_cache` runs them, with two changes
the shared loop needs: each row's positions and attention mask are its own (prompts are
left-padded), and the keys and values are written with a core op at the loop's step. The
tokenizer is the preset's byte-level BPE (`GPT2Tokenizer`: TF.Text's RegexSplitWithOffsets and
core TF ops), run in the graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from serving.model.transformer import write_row
from serving.model.vocab import Vocab

FAMILY = "gpt2"
TASK_CLASS = "GPT2CausalLM"


@dataclass(frozen=True)
class GPT2Window:
    """The window of the backbone (its position table)."""

    context: int


class GPT2Decoder(tf.Module):
    """Prefill and one-step decode over a keras_hub GPT-2 backbone's layers."""

    def __init__(self, backbone: Any) -> None:
        super().__init__(name="gpt2")
        self.backbone = backbone
        self.cfg = GPT2Window(int(backbone.max_sequence_length))

    def _embed(self, ids: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
        b = self.backbone
        table = tf.convert_to_tensor(b.position_embedding.position_embeddings)
        return b.embeddings_add((b.token_embedding(ids), tf.gather(table, positions)))

    @staticmethod
    def _block(layer: Any, x: tf.Tensor, mask: tf.Tensor, write: Any) -> tuple:
        """One pre-norm `TransformerDecoder` block as its `call` runs it at inference, with the
        keys and values written by `write` (k, v) -> (keys, values) instead of the layer's own
        cache update (XLA's dynamic update slice, which TF Serving cannot run)."""
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

    def prefill(
        self, ids: tf.Tensor, positions: tf.Tensor, bias: tf.Tensor
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """Prompts ids [B, S] with bias [B, S, S] -> (last logits [B, V], K and V per layer).

        Keys and values come two per layer, each [B, S, H, Dh]; `new_cache` lays them out.
        """
        x, caches = self._embed(ids, positions), []
        for layer in self.backbone.transformer_layers:
            x, kv = self._block(layer, x, bias >= 0.0, lambda k, v: (k, v))
            caches += kv
        return self._logits(x[:, -1:, :])[:, 0, :], caches

    @staticmethod
    def new_cache(keys_values: list[tf.Tensor], room: tf.Tensor) -> list[tf.Tensor]:
        """Keys and values [B, S, H, Dh] -> [B, S + room, H, Dh], zeros after S."""
        return [tf.pad(kv, [[0, 0], [0, room], [0, 0], [0, 0]]) for kv in keys_values]

    def decode(self, token, position, row, bias, cache) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """Feed one token [B] at `position` [B] into cache row `row`; bias [B, 1, 1, T]."""
        x = self._embed(token[:, None], position[:, None])
        begin = tf.stack([0, row, 0, 0])
        end, written = begin + 1, []
        for i, layer in enumerate(self.backbone.transformer_layers):

            def write(k: tf.Tensor, v: tf.Tensor, i: int = i) -> tuple[tf.Tensor, tf.Tensor]:
                return (
                    write_row(cache[2 * i], k, begin, end, axis=1),
                    write_row(cache[2 * i + 1], v, begin, end, axis=1),
                )

            x, kv = self._block(layer, x, bias[:, 0] >= 0.0, write)
            written += kv
        return self._logits(x)[:, 0, :], written


def _byte_decoder() -> dict[str, bytes]:
    """GPT-2's printable stand-in character -> the byte it stands for."""
    from keras_hub.src.tokenizers.byte_pair_tokenizer import bytes_to_unicode

    byte_list, unicode_list = bytes_to_unicode()
    return {u: bytes(b) for b, u in zip(byte_list, unicode_list, strict=True)}


def vocab(tokenizer: Any, size: int) -> Vocab:
    """The preset tokenizer's ids as bytes (special tokens: none), `size` ids as the model has."""
    decoder = _byte_decoder()
    pieces = [b""] * size
    special = set(tokenizer.special_tokens)
    for token, index in tokenizer.vocabulary.items():
        if index < size and token not in special:
            pieces[index] = b"".join(decoder[c] for c in token)

    def encode(text: tf.Tensor) -> tf.RaggedTensor:
        return tf.cast(tokenizer(text), tf.int32)

    return Vocab(tuple(pieces), int(tokenizer.end_token_id), encode, False, tokenizer)


def adapt(causal_lm: Any) -> tuple[GPT2Decoder, Vocab]:
    """A loaded `GPT2CausalLM` as (decoder, vocabulary)."""
    backbone = causal_lm.backbone
    return GPT2Decoder(backbone), vocab(
        causal_lm.preprocessor.tokenizer, int(backbone.vocabulary_size)
    )
