"""Training with AdamW, a progress bar, TensorBoard events and a cached checkpoint per recipe."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from serving.model import data
from serving.model.config import Preset
from serving.model.transformer import GPT
from tokenpulse.logging import get_logger

log = get_logger(__name__)


@dataclass
class TrainReport:
    """What a training run (or the cached one it reused) achieved."""

    preset: str
    fingerprint: str
    steps: int
    seconds: float
    train_loss: float
    held_out_bits_per_byte: float
    corpus_bytes: int
    cached: bool = False


class AdamW:
    """Decoupled-weight-decay Adam over a list of tf.Variables (small, explicit, XLA-friendly)."""

    def __init__(self, variables: list[tf.Variable], weight_decay: float) -> None:
        self.variables = variables
        self.m = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]
        self.v = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]
        self.t = tf.Variable(0.0, trainable=False)
        # Norm gains, biases and position embeddings are not decayed.
        self.decay = [
            weight_decay if len(v.shape) == 2 and "wpe" not in v.name else 0.0 for v in variables
        ]

    def apply(self, grads: list[tf.Tensor], lr: tf.Tensor) -> None:
        """One update step."""
        b1, b2, eps = 0.9, 0.95, 1e-8
        self.t.assign_add(1.0)
        c1 = 1.0 - tf.pow(b1, self.t)
        c2 = 1.0 - tf.pow(b2, self.t)
        for var, g, m, v, wd in zip(self.variables, grads, self.m, self.v, self.decay, strict=True):
            m.assign(b1 * m + (1 - b1) * g)
            v.assign(b2 * v + (1 - b2) * tf.square(g))
            update = (m / c1) / (tf.sqrt(v / c2) + eps)
            var.assign_sub(lr * (update + wd * var))


def _lr(step: int, preset: Preset) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    cfg = preset.train
    if step < cfg.warmup_steps:
        return cfg.learning_rate * (step + 1) / cfg.warmup_steps
    frac = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def _loss(model: GPT, batch: tf.Tensor) -> tf.Tensor:
    logits = model.logits(batch[:, :-1])
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=batch[:, 1:], logits=logits)
    return tf.reduce_mean(ce)


def checkpoint_dir(cache_dir: Path, preset: Preset) -> Path:
    """Where the checkpoint for this exact recipe lives."""
    return cache_dir / "checkpoints" / f"{preset.name}-{preset.fingerprint()}"


def load_cached(model: GPT, cache_dir: Path, preset: Preset) -> TrainReport | None:
    """Restore the recipe's checkpoint into `model` when one exists and matches."""
    ckpt_dir = checkpoint_dir(cache_dir, preset)
    meta = ckpt_dir / "report.json"
    if not meta.exists():
        return None
    try:
        tf.train.Checkpoint(model=model).read(
            str(ckpt_dir / "weights")
        ).assert_existing_objects_matched()
    except (tf.errors.OpError, AssertionError, ValueError) as exc:
        log.warning("cached checkpoint unusable, retraining", path=str(ckpt_dir), error=str(exc))
        return None
    report = TrainReport(**json.loads(meta.read_text()))
    report.cached = True
    return report


def train(model: GPT, preset: Preset, cache_dir: Path, progress: bool = True) -> TrainReport:
    """Train `model` on the shipped corpus (or reuse the cached checkpoint of this recipe)."""
    cached = load_cached(model, cache_dir, preset)
    if cached is not None:
        log.info("reusing cached checkpoint", preset=preset.name, bpb=cached.held_out_bits_per_byte)
        return cached
    cfg = preset.train
    stream = data.token_stream(data.documents(cfg.corpus_bytes))
    train_ids, held_ids = data.split(stream)
    rng = np.random.default_rng(cfg.seed)
    optimizer = AdamW(list(model.trainable_variables), cfg.weight_decay)
    ctx = model.cfg.context

    @tf.function(jit_compile=True, reduce_retracing=True)
    def step(batch: tf.Tensor, lr: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = _loss(model, batch)
        # Embedding gathers give IndexedSlices; the optimiser wants dense tensors.
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, optimizer.variables)]
        grads, _ = tf.clip_by_global_norm(grads, 1.0)
        optimizer.apply(grads, lr)
        return loss

    ckpt_dir = checkpoint_dir(cache_dir, preset)
    writer = tf.summary.create_file_writer(str(ckpt_dir / "tensorboard"))
    started = time.perf_counter()
    loss_ema = float("nan")
    bar = tqdm(range(cfg.steps), desc=f"train {preset.name}", unit="step", disable=not progress)
    with writer.as_default():
        for i in bar:
            batch = tf.constant(data.windows(train_ids, ctx, cfg.batch_size, rng))
            lr = _lr(i, preset)
            loss = float(step(batch, tf.constant(lr)))
            loss_ema = loss if math.isnan(loss_ema) else 0.95 * loss_ema + 0.05 * loss
            bar.set_postfix(loss=f"{loss_ema:.3f}", bpb=f"{loss_ema / math.log(2):.2f}")
            tf.summary.scalar("train/loss", loss, step=i)
            tf.summary.scalar("train/learning_rate", lr, step=i)
        seconds = time.perf_counter() - started
        bpb = held_out_bits_per_byte(model, held_ids, cfg.eval_batches, cfg.eval_batch_size, rng)
        tf.summary.scalar("eval/held_out_bits_per_byte", bpb, step=cfg.steps)
    writer.flush()
    report = TrainReport(
        preset.name,
        preset.fingerprint(),
        cfg.steps,
        round(seconds, 1),
        round(loss_ema, 4),
        round(bpb, 4),
        int(len(stream)),
    )
    tf.train.Checkpoint(model=model).write(str(ckpt_dir / "weights"))
    (ckpt_dir / "report.json").write_text(json.dumps(asdict(report), indent=2))
    log.info("trained", **asdict(report))
    return report


def held_out_bits_per_byte(
    model: GPT, held: np.ndarray, batches: int, batch_size: int, rng: np.random.Generator
) -> float:
    """Mean next-byte cross-entropy on held-out text, in bits."""
    total = 0.0
    for _ in range(batches):
        batch = tf.constant(data.windows(held, model.cfg.context, batch_size, rng))
        total += float(_loss(model, batch))
    return total / batches / math.log(2)
