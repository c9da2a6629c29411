"""The KV-cached prefill and decode step every keras_hub family shares (`Decoder` protocol).

A family says how its layers embed, run one block and score (`_embed`, `_block`, `_logits`);
this class drives them the way the shared loop needs: each row's positions and attention mask
are its own (prompts are left-padded), and each block's keys and values, [B, T, H, Dh] as
keras_hub lays them out, are written at the loop's step with a core op (`write_row`) instead
of keras_hub's own cache update (XLA's dynamic update slice, which TF Serving cannot run).

The module tracks the backbone's weights as the plain `tf.Variable`s they wrap, never the Keras
layers: a Keras 3 variable exports itself as two graph variables (`KerasVariable.
_export_to_saved_model_graph` copies the inner `tf.Variable`, which the traced functions read,
and adds a `tf.Variable` wrapping that copy, which the SavedModel's restore op fills). TF2's
loader binds functions to restored objects and never notices; a TF1 session, which is how
`tensorflow_model_server` loads a model (restore op, init op, then `Session::Run`), leaves the
variables the functions read unset: "Could not find variable token_embedding/embeddings".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from serving.model.transformer import write_row

# (keys, values) computed by a block -> (keys, values) it attends over
Write = Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]


@dataclass(frozen=True)
class _Layers:
    """The keras_hub backbone, held where `tf.Module` does not track it (see the module doc)."""

    backbone: Any


@dataclass(frozen=True)
class HubWindow:
    """How many positions the model reads (its position table, or its preset's length)."""

    context: int


def _plain(weight: Any) -> tf.Variable:
    """The `tf.Variable` a Keras 3 weight wraps (a plain one as it is)."""
    value = weight if isinstance(weight, tf.Variable) else weight.value
    if not isinstance(value, tf.Variable):
        raise TypeError(f"weight {weight.path} holds no tf.Variable: {type(value).__name__}")
    return value


class CachedDecoder(tf.Module):
    """Prefill and one-step decode over a keras_hub backbone's layers."""

    def __init__(self, backbone: Any, context: int, name: str) -> None:
        super().__init__(name=name)
        self._layers = _Layers(backbone)
        # the variables the traced functions read, saved and restored as themselves
        self.weights = [_plain(w) for w in backbone.weights]
        self.cfg = HubWindow(context)

    @property
    def backbone(self) -> Any:
        """The keras_hub backbone whose layers the decode runs (untracked: see the module doc)."""
        return self._layers.backbone

    def _embed(self, ids: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
        """ids [B, S] at positions [B, S] -> hidden states [B, S, D]."""
        raise NotImplementedError

    def _block(
        self, layer: Any, x: tf.Tensor, positions: tf.Tensor, mask: tf.Tensor, write: Write
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """One block at inference: (its output, [keys, values] it attended over)."""
        raise NotImplementedError

    def _logits(self, x: tf.Tensor) -> tf.Tensor:
        """Hidden states [B, S, D] -> logits [B, S, V]."""
        raise NotImplementedError

    def prefill(
        self, ids: tf.Tensor, positions: tf.Tensor, bias: tf.Tensor
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """Prompts ids [B, S] with bias [B, S, S] -> (last logits [B, V], K and V per layer).

        Keys and values come two per layer, each [B, S, H, Dh]; `new_cache` lays them out.
        """
        x, caches = self._embed(ids, positions), []
        for layer in self.backbone.transformer_layers:
            x, kv = self._block(layer, x, positions, bias >= 0.0, lambda k, v: (k, v))
            caches += kv
        return self._logits(x[:, -1:, :])[:, 0, :], caches

    @staticmethod
    def new_cache(keys_values: list[tf.Tensor], room: tf.Tensor) -> list[tf.Tensor]:
        """Keys and values [B, S, H, Dh] -> [B, S + room, H, Dh], zeros after S."""
        return [tf.pad(kv, [[0, 0], [0, room], [0, 0], [0, 0]]) for kv in keys_values]

    def decode(self, token, position, row, bias, cache) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """Feed one token [B] at `position` [B] into cache row `row`; bias [B, 1, 1, T]."""
        positions = position[:, None]
        x = self._embed(token[:, None], positions)
        begin = tf.stack([0, row, 0, 0])
        end, written = begin + 1, []
        for i, layer in enumerate(self.backbone.transformer_layers):

            def write(k: tf.Tensor, v: tf.Tensor, i: int = i) -> tuple[tf.Tensor, tf.Tensor]:
                return (
                    write_row(cache[2 * i], k, begin, end, axis=1),
                    write_row(cache[2 * i + 1], v, begin, end, axis=1),
                )

            x, kv = self._block(layer, x, positions, bias[:, 0] >= 0.0, write)
            written += kv
        return self._logits(x)[:, 0, :], written
