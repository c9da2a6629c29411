"""Training: loss falls, the recipe's checkpoint is cached and reused, TensorBoard gets events."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from serving.model import data, train
from serving.model.config import get_preset
from serving.model.transformer import GPT


def _quick_preset(steps: int):
    base = get_preset("tiny")
    return dataclasses.replace(
        base, train=dataclasses.replace(base.train, steps=steps, corpus_bytes=60_000)
    )


def test_corpus_is_shipped_text_split_by_end_of_text() -> None:
    docs = data.documents(50_000)
    assert 40_000 < sum(len(d) for d in docs) <= 50_000
    stream = data.token_stream(docs)
    assert stream.max() == 256 and (stream == 256).sum() == len(docs)
    train_ids, held = data.split(stream)
    assert len(held) > 0 and len(train_ids) + len(held) == len(stream)


def test_training_lowers_held_out_bits_per_byte(tmp_path: Path) -> None:
    preset = _quick_preset(60)
    model = GPT(preset.model, seed=1)
    held = data.split(data.token_stream(data.documents(60_000)))[1]
    before = train.held_out_bits_per_byte(model, held, 2, 8, np.random.default_rng(0))
    report = train.train(model, preset, tmp_path, progress=False)
    assert report.held_out_bits_per_byte < before - 1.0  # random init is ~8 bits per byte
    assert not report.cached


def test_checkpoint_is_reused_for_the_same_recipe_only(tmp_path: Path) -> None:
    preset = _quick_preset(3)
    first = GPT(preset.model, seed=1)
    train.train(first, preset, tmp_path, progress=False)
    again = GPT(preset.model, seed=99)
    report = train.train(again, preset, tmp_path, progress=False)
    assert report.cached
    np.testing.assert_array_equal(first.wte.numpy(), again.wte.numpy())
    events = list((train.checkpoint_dir(tmp_path, preset) / "tensorboard").glob("events.out.*"))
    assert events
    other = _quick_preset(4)
    assert train.load_cached(GPT(other.model), tmp_path, other) is None
