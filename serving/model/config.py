"""Model and training presets: `tiny` trains in seconds for tests, `default` reads well."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from serving.model.bpe import SPLIT_PATTERN

# Steps between weight and gradient histograms; 0 turns them off. `bench training`, default
# preset, 2 shared cores: one event costs about two steps (+1.6 % wall, +1.9 % CPU at 100), a
# whole 1800-step run +2.4 % with the one-off trace; within the 5 % budget (50 would be ~4 %).
HISTOGRAM_EVERY = 100


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the GPT-2-layout decoder."""

    context: int
    d_model: int
    n_layers: int
    n_heads: int
    vocab_size: int  # 256 bytes, the merged pieces, end-of-text and end-of-turn (bpe.py)
    # Key/value heads, each shared by n_heads / n_kv_heads query heads (grouped-query attention,
    # as Llama 2 and Mistral; 1 is multi-query). A decode step reads the whole KV cache, so at
    # a long window the cache's size sets how much a late step costs over an early one.
    n_kv_heads: int

    @property
    def kv_dim(self) -> int:
        """Width of one position's keys (and of its values): every KV head's."""
        return self.n_kv_heads * self.head_dim

    @property
    def groups(self) -> int:
        """Query heads per KV head."""
        return self.n_heads // self.n_kv_heads

    @property
    def d_ff(self) -> int:
        """MLP width, 4x as in GPT-2."""
        return 4 * self.d_model

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_heads

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError("d_model must be a multiple of n_heads")
        if self.n_kv_heads < 1 or self.n_heads % self.n_kv_heads:
            raise ValueError("n_heads must be a multiple of n_kv_heads (at least 1)")
        if self.context < 8:
            raise ValueError("context must be at least 8 tokens")


@dataclass(frozen=True)
class TrainConfig:
    """Optimiser schedule and data sampling."""

    steps: int
    batch_size: int
    learning_rate: float
    warmup_steps: int
    weight_decay: float = 0.01
    eval_batches: int = 8
    eval_batch_size: int = 32  # held-out windows per eval batch, independent of the train batch
    seed: int = 1234
    corpus_bytes: int = 3_000_000  # cap on the shipped-text corpus
    dialogue_share: float = 0.3  # of it, the chat dialogues (data.py)


@dataclass(frozen=True)
class Preset:
    """A named model + training recipe."""

    name: str
    model: ModelConfig
    train: TrainConfig

    def fingerprint(self) -> str:
        """Stable hash of the recipe, its tokenizer's word split included: a cached checkpoint
        is reused only when it matches."""
        recipe = {"model": asdict(self.model), "train": asdict(self.train), "split": SPLIT_PATTERN}
        blob = json.dumps(recipe, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# Windows are in subword tokens (a token is about 3 bytes of English: bpe.py). Each preset
# trains on as many tokens per step as its byte-level predecessor did (64 x 16 and 128 x 8),
# each token now covering several bytes of text. A step's cost grows with the vocabulary (the
# tied head and its softmax: +0.35 ms a step per id at `default`'s size on 2 shared cores, and
# sizes near a power of two cost several times more under XLA on CPU), so the vocabularies are
# small and odd-sized, and the steps fewer: the cold builds cost the CPU they cost before.
PRESETS: dict[str, Preset] = {
    "tiny": Preset(
        "tiny",
        ModelConfig(context=128, d_model=64, n_layers=2, n_heads=2, vocab_size=509, n_kv_heads=2),
        TrainConfig(
            steps=100,
            batch_size=8,
            learning_rate=5e-3,
            warmup_steps=10,
            eval_batches=2,
            eval_batch_size=16,
            corpus_bytes=200_000,
        ),
    ),
    "default": Preset(
        "default",
        ModelConfig(context=256, d_model=192, n_layers=4, n_heads=4, vocab_size=1001, n_kv_heads=1),
        # Many small steps beat few large ones at this compute (measured on the byte-level
        # model: 2.53 vs 2.74 held-out bits per byte for the same ~5 minutes on 2 cores).
        TrainConfig(steps=1300, batch_size=4, learning_rate=3e-3, warmup_steps=60),
    ),
}


def get_preset(name: str) -> Preset:
    """Look a preset up by name, with a clear error for unknown names."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}") from None
