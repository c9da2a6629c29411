"""Training with AdamW, a progress bar, TensorBoard events and a cached checkpoint per recipe.

TensorBoard gets the loss, the learning rate and the global gradient norm (before clipping) every
step, and every `HISTOGRAM_EVERY` steps a histogram of each weight and of its gradient, per layer
(`weights/block_0/w_qkv`, `gradients/wte`...). A separate graph function (not XLA: its compile
would cost more than a run's events) takes the gradients of the step's batch before the step and
buckets weights and gradients in one call; each histogram is then one write. The training step
itself is the same compiled function with histograms on or off, and summaries draw no random
numbers, so the trained weights are bit-identical for a seed (a test compares them; so did a
check against the step before histograms existed). `tokenpulse bench training` measures the cost.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorboard.plugins.histogram import metadata as histogram_metadata
from tqdm import tqdm

from serving.model import bpe, data
from serving.model.config import HISTOGRAM_EVERY, Preset
from serving.model.tokenizer import SavedSpec, read_spec
from serving.model.transformer import GPT
from tokenpulse.logging import get_logger

log = get_logger(__name__)
BUCKETS = 30  # per histogram, as tf.summary.histogram
HISTOGRAM_METADATA = histogram_metadata.create_summary_metadata(display_name="", description="")


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
    held_out_bits_per_token: float = float("nan")
    bytes_per_token: float = float("nan")
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


def load_cached(
    model: GPT, cache_dir: Path, preset: Preset
) -> tuple[TrainReport, bpe.BpeSpec] | None:
    """Restore the recipe's checkpoint and its vocabulary when one exists and matches."""
    ckpt_dir = checkpoint_dir(cache_dir, preset)
    meta = ckpt_dir / "report.json"
    if not meta.exists():
        return None
    try:
        spec = read_spec(str(ckpt_dir / "weights"))
        if spec is None:
            raise ValueError("no vocabulary in the checkpoint")
        tf.train.Checkpoint(model=model, tokenizer=SavedSpec(spec)).read(
            str(ckpt_dir / "weights")
        ).assert_existing_objects_matched()
    except (tf.errors.OpError, AssertionError, ValueError) as exc:
        log.warning("cached checkpoint unusable, retraining", path=str(ckpt_dir), error=str(exc))
        return None
    report = TrainReport(**json.loads(meta.read_text()))
    report.cached = True
    return report, spec


def prepare(preset: Preset, spec: bpe.BpeSpec | None = None) -> tuple[bpe.BpeSpec, np.ndarray]:
    """The recipe's vocabulary (trained on its text unless given) and its text as tokens."""
    texts = data.corpus(preset.train)
    if spec is None:
        log.info("training the tokenizer", preset=preset.name, vocab=preset.model.vocab_size)
        spec = bpe.train(texts, preset.model.vocab_size)
    if spec.vocab_size != preset.model.vocab_size:
        raise bpe.BpeError(
            f"a vocabulary of {spec.vocab_size} ids for a model of {preset.model.vocab_size}"
        )
    return spec, data.token_stream(texts, spec)


def buckets(x: tf.Tensor, count: int = BUCKETS) -> tf.Tensor:
    """TensorBoard's histogram layout, [count, 3] rows of (left edge, right edge, count), over
    equal-width buckets from the minimum to the maximum (XLA-compilable)."""
    x = tf.reshape(tf.cast(x, tf.float64), [-1])
    low, high = tf.reduce_min(x), tf.reduce_max(x)
    width = tf.where(high > low, (high - low) / count, tf.constant(1.0, tf.float64))
    index = tf.clip_by_value(tf.cast(tf.floor((x - low) / width), tf.int32), 0, count - 1)
    counts = tf.math.unsorted_segment_sum(tf.ones_like(x), index, count)
    edges = low + width * tf.range(count + 1, dtype=tf.float64)
    right = tf.where(high > low, edges[1:], tf.fill([count], low))
    return tf.stack([tf.where(high > low, edges[:-1], right), right, counts], axis=1)


def layer_tags(model: GPT) -> list[str]:
    """A per-layer name for each trainable variable, in `model.trainable_variables` order:
    `block_<i>/<weight>` inside a block, the weight's own name outside."""
    names = {id(v): f"{blk.name}/{v.name.split(':')[0]}"
             for blk in model.blocks for v in blk.trainable_variables}  # fmt: skip
    return [names.get(id(v), v.name.split(":")[0]) for v in model.trainable_variables]


class Trainer:
    """The compiled training step and its summaries (used by `train` and `bench training`)."""

    def __init__(self, model: GPT, weight_decay: float, histogram_every: int) -> None:
        self.model = model
        self.optimizer = AdamW(list(model.trainable_variables), weight_decay)
        self.histogram_every = histogram_every
        self.tags = layer_tags(model)
        variables = self.optimizer.variables

        def gradients(batch: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
            with tf.GradientTape() as tape:
                loss = _loss(model, batch)
            # Embedding gathers give IndexedSlices; the optimiser wants dense tensors.
            return loss, [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]

        # without autograph, as Generator's signatures (generate.py): nothing here is Python control
        # flow on tensors, and converting it cost 1.3 CPU-s of each trainer's 5 s of tracing
        @tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
        def step(batch: tf.Tensor, lr: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            loss, grads = gradients(batch)
            grads, norm = tf.clip_by_global_norm(grads, 1.0)
            self.optimizer.apply(grads, lr)
            return loss, norm

        @tf.function(reduce_retracing=True, autograph=False)
        def peek(batch: tf.Tensor) -> list[tf.Tensor]:
            """Histogram buckets of each weight, then of each gradient the step will apply to
            this batch (before clipping); updates nothing."""
            grads = gradients(batch)[1]
            return [buckets(t) for t in [*variables, *grads]]

        def histograms(step: tf.Tensor, hists: list[tf.Tensor]) -> None:
            # one write op per histogram: tf.summary.histogram costs ~20 eager ops each (0.9 s an
            # event), or 15 s to trace all of them into a graph
            names = [f"{kind}/{tag}" for kind in ("weights", "gradients") for tag in self.tags]
            for name, hist in zip(names, hists, strict=True):
                tf.summary.write(name, hist, step=step, metadata=HISTOGRAM_METADATA)

        self.update, self.peek, self.write_histograms = step, peek, histograms
        self.last_norm = float("nan")  # the last step's gradient norm, before clipping

    def due(self, i: int) -> bool:
        """Whether step `i` writes histograms."""
        return self.histogram_every > 0 and i % self.histogram_every == 0

    def run_step(self, i: int, batch: tf.Tensor, lr: float) -> float:
        """One update, with its summaries written to the default writer; the loss."""
        grads = self.peek(batch) if self.due(i) else None
        loss_t, norm = self.update(batch, tf.constant(lr))
        loss = float(loss_t)
        tf.summary.scalar("train/loss", loss, step=i)
        tf.summary.scalar("train/learning_rate", lr, step=i)
        self.last_norm = float(norm)
        tf.summary.scalar("train/grad_global_norm", self.last_norm, step=i)
        if grads is not None:  # the weights after this step, the gradients it applied
            self.write_histograms(tf.constant(i, tf.int64), grads)
        return loss


def train(
    model: GPT,
    preset: Preset,
    cache_dir: Path,
    progress: bool = True,
    histogram_every: int = HISTOGRAM_EVERY,
) -> tuple[TrainReport, bpe.BpeSpec]:
    """Train `model` and its vocabulary on the shipped corpus (or reuse the cached checkpoint of
    this recipe); the report and the vocabulary."""
    cached = load_cached(model, cache_dir, preset)
    if cached is not None:
        log.info("reusing cached checkpoint", preset=preset.name,
                 bpb=cached[0].held_out_bits_per_byte)  # fmt: skip
        return cached
    cfg = preset.train
    spec, stream = prepare(preset)
    train_ids, held_ids = data.split(stream)
    rng = np.random.default_rng(cfg.seed)
    trainer = Trainer(model, cfg.weight_decay, histogram_every)
    ctx = model.cfg.context

    ckpt_dir = checkpoint_dir(cache_dir, preset)
    writer = tf.summary.create_file_writer(str(ckpt_dir / "tensorboard"))
    started = time.perf_counter()
    loss_ema = float("nan")
    bar = tqdm(range(cfg.steps), desc=f"train {preset.name}", unit="step", disable=not progress)
    with writer.as_default():
        for i in bar:
            batch = tf.constant(data.windows(train_ids, ctx, cfg.batch_size, rng))
            loss = trainer.run_step(i, batch, _lr(i, preset))
            loss_ema = loss if math.isnan(loss_ema) else 0.95 * loss_ema + 0.05 * loss
            bar.set_postfix(loss=f"{loss_ema:.3f}", bpt=f"{loss_ema / math.log(2):.2f}")
        seconds = time.perf_counter() - started
        held = held_out(model, held_ids, spec, cfg.eval_batches, cfg.eval_batch_size, rng)
        tf.summary.scalar("eval/held_out_bits_per_byte", held.bits_per_byte, step=cfg.steps)
        tf.summary.scalar("eval/held_out_bits_per_token", held.bits_per_token, step=cfg.steps)
    writer.flush()
    report = TrainReport(
        preset.name,
        preset.fingerprint(),
        cfg.steps,
        round(seconds, 1),
        round(loss_ema, 4),
        round(held.bits_per_byte, 4),
        round(data.bytes_per_token(stream, spec) * len(stream)),
        round(held.bits_per_token, 4),
        round(held.bytes_per_token, 4),
    )
    tf.train.Checkpoint(model=model, tokenizer=SavedSpec(spec)).write(str(ckpt_dir / "weights"))
    (ckpt_dir / "report.json").write_text(json.dumps(asdict(report), indent=2))
    log.info("trained", **asdict(report))
    return report, spec


@dataclass(frozen=True)
class HeldOut:
    """Cross-entropy on held-out text, per token and per byte of the text it stands for."""

    bits_per_token: float
    bytes_per_token: float

    @property
    def bits_per_byte(self) -> float:
        """The figure that compares across tokenizers."""
        return self.bits_per_token / self.bytes_per_token


def held_out(
    model: GPT,
    held: np.ndarray,
    spec: bpe.BpeSpec,
    batches: int,
    batch_size: int,
    rng: np.random.Generator,
) -> HeldOut:
    """Mean next-token cross-entropy on held-out windows, in bits, and their bytes per token."""
    total, lengths, tokens = 0.0, np.array([len(p) for p in spec.pieces()]), 0
    size = 0
    for _ in range(batches):
        batch = data.windows(held, model.cfg.context, batch_size, rng)
        total += float(_loss(model, tf.constant(batch)))
        size += int(lengths[batch[:, 1:]].sum())
        tokens += batch[:, 1:].size
    return HeldOut(total / batches / math.log(2), size / tokens)
