"""Training: loss falls, the recipe's checkpoint is cached and reused, TensorBoard gets events."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from serving.model import bpe, data
from serving.model.config import get_preset
from tokenpulse import chatformat


def _quick_preset(steps: int):
    base = get_preset("tiny")
    return dataclasses.replace(
        base, train=dataclasses.replace(base.train, steps=steps, corpus_bytes=60_000)
    )


def test_corpus_is_shipped_text_and_dialogues_split_by_end_of_text() -> None:
    docs = data.documents(50_000)
    assert 40_000 < sum(len(d) for d in docs) <= 50_000
    cfg = _quick_preset(1).train
    texts = data.corpus(cfg)
    chat = [t for t in texts if t.endswith(chatformat.TURN_END)]
    assert 0.25 < sum(map(len, chat)) / sum(map(len, texts)) < 0.35  # dialogue_share 0.3
    assert any("退款" in t for t in chat) and any("refund" in t for t in chat)
    assert data.corpus(cfg) == texts  # fixed for the seed
    spec = bpe.train(texts, 400)
    stream = data.token_stream(texts, spec)
    eot, eot_turn = spec.special_ids
    assert (stream == eot).sum() == len(texts)
    assert (stream == eot_turn).sum() == sum(t.count(chatformat.END_OF_TURN) for t in chat)
    train_ids, held = data.split(stream)
    assert len(held) > 0 and len(train_ids) + len(held) == len(stream)


def test_training_lowers_held_out_bits_per_byte(tmp_path: Path) -> None:
    from serving.model import train
    from serving.model.transformer import GPT

    preset = _quick_preset(60)
    model = GPT(preset.model, seed=1)
    spec, stream = train.prepare(preset)
    held = data.split(stream)[1]
    before = train.held_out(model, held, spec, 2, 8, np.random.default_rng(0))
    report, trained = train.train(model, preset, tmp_path, progress=False)
    assert trained == spec  # the vocabulary is trained the same way every time
    assert report.held_out_bits_per_token < before.bits_per_token - 2.0  # random: ~9 bits
    assert report.held_out_bits_per_byte == pytest.approx(
        report.held_out_bits_per_token / report.bytes_per_token, abs=1e-3
    )
    assert report.bytes_per_token > 1.3  # subwords
    assert not report.cached


def test_checkpoint_is_reused_for_the_same_recipe_only(tmp_path: Path) -> None:
    from serving.model import train
    from serving.model.transformer import GPT

    preset = _quick_preset(3)
    first = GPT(preset.model, seed=1)
    train.train(first, preset, tmp_path, progress=False)
    again = GPT(preset.model, seed=99)
    report, spec = train.train(again, preset, tmp_path, progress=False)
    assert report.cached and spec == train.prepare(preset)[0]
    np.testing.assert_array_equal(first.wte.numpy(), again.wte.numpy())
    events = list((train.checkpoint_dir(tmp_path, preset) / "tensorboard").glob("events.out.*"))
    assert events
    other = _quick_preset(4)
    assert train.load_cached(GPT(other.model), tmp_path, other) is None


def _events(directory: Path) -> dict[str, tuple[str, list[int]]]:
    """Tag -> (plugin, steps) of every summary in a run's event files."""
    import tensorflow as tf

    found: dict[str, tuple[str, list[int]]] = {}
    for path in sorted(directory.glob("events.out.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                plugin = value.metadata.plugin_data.plugin_name or found.get(value.tag, ("",))[0]
                found.setdefault(value.tag, (plugin, []))[1].append(event.step)
    return found


def test_tensorboard_gets_histograms_per_layer_the_gradient_norm_and_the_learning_rate(
    tmp_path: Path,
) -> None:
    import tensorflow as tf
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from serving.model import train
    from serving.model.transformer import GPT

    preset = _quick_preset(5)
    model = GPT(preset.model, seed=1)
    train.train(model, preset, tmp_path, progress=False, histogram_every=2)
    events = _events(train.checkpoint_dir(tmp_path, preset) / "tensorboard")
    for tag in ("train/loss", "train/learning_rate", "train/grad_global_norm"):
        assert events[tag] == ("scalars", [0, 1, 2, 3, 4]), tag
    tags = train.layer_tags(model)
    assert len(set(tags)) == len(tags) == len(model.trainable_variables)
    assert {"wte", "wpe", "lnf_g", "block_0/w_qkv", "block_1/w_proj"} <= set(tags)
    for tag in tags:
        for kind in ("weights", "gradients"):
            assert events[f"{kind}/{tag}"] == ("histograms", [0, 2, 4]), (kind, tag)
    assert events["eval/held_out_bits_per_byte"] == ("scalars", [5])
    assert events["eval/held_out_bits_per_token"] == ("scalars", [5])
    # as TensorBoard reads them: [30, 3] rows of (left, right, count) over every element
    acc = EventAccumulator(str(train.checkpoint_dir(tmp_path, preset) / "tensorboard"))
    acc.Reload()
    for tag, var in zip(tags, model.trainable_variables, strict=True):
        for kind in ("weights", "gradients"):
            hist = tf.make_ndarray(acc.Tensors(f"{kind}/{tag}")[0].tensor_proto)
            assert hist.shape == (train.BUCKETS, 3) and hist[:, 2].sum() == var.shape.num_elements()
            assert (hist[:, 0] <= hist[:, 1]).all()


def test_summaries_change_neither_the_weights_nor_the_random_stream(tmp_path: Path) -> None:
    """Histograms every step or never: the same seed trains the same weights, bit for bit."""
    from serving.model import train
    from serving.model.transformer import GPT

    preset = _quick_preset(4)
    reports, weights = [], []
    for every in (1, 0):
        model = GPT(preset.model, seed=1)
        reports.append(train.train(model, preset, tmp_path / str(every), progress=False,
                                   histogram_every=every)[0])  # fmt: skip
        weights.append([v.numpy() for v in model.trainable_variables])
    for with_histograms, without in zip(*weights, strict=True):
        np.testing.assert_array_equal(with_histograms, without)
    # the held-out evaluation draws its windows after training from the same generator
    assert reports[0].held_out_bits_per_byte == reports[1].held_out_bits_per_byte
    assert reports[0].train_loss == reports[1].train_loss
