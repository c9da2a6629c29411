"""The checkpointed training loop of one process: the in-process run, or one worker of several.

One process without a strategy trains as `build` does (`train.Trainer`: the same XLA step, data
draws and weights, bit for bit); a strategy trains through `replicas.ReplicatedTrainer`. Every
replica sees its share of the same global batch: each worker draws the whole batch from the
seeded generator, as one process would, and keeps its share, so the data order does not depend
on the number of workers. A checkpoint is written every K steps and at the end (the chief's in
the run's `checkpoints/`; another worker's, which it must write too, into a scratch directory it
removes); a restarted run resumes from the newest one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from serving.model import bpe, checkpoints, data, replicas
from serving.model.config import HISTOGRAM_EVERY, Preset, get_preset
from serving.model.metrics import TrainingMetrics
from serving.model.settings import TrainSettings
from serving.model.tokenizer import read_spec
from serving.model.train import Trainer, TrainReport, _lr, held_out, prepare
from serving.model.transformer import GPT
from tokenpulse.logging import get_logger

log = get_logger(__name__)
REPORT = "report.json"
TENSORBOARD = "tensorboard"


@dataclass(frozen=True)
class Role:
    """Which worker this process is: index 0 is the chief (progress, TensorBoard, report)."""

    index: int = 0
    count: int = 1

    @property
    def chief(self) -> bool:
        """Whether this worker reports for the run."""
        return self.index == 0

    @property
    def name(self) -> str:
        """`chief` or `worker`."""
        return "chief" if self.chief else "worker"


def recipe(settings: TrainSettings) -> Preset:
    """The preset, with the step count of `--steps` when given (a recipe of its own)."""
    preset = get_preset(settings.preset)
    if settings.steps is None:
        return preset
    train = dataclasses.replace(preset.train, steps=settings.steps)
    return dataclasses.replace(preset, train=train)


class _Run:
    """The model, its trainer and the checkpoint that carries both and the run's position."""

    def __init__(
        self, settings: TrainSettings, preset: Preset, role: Role, spec: bpe.BpeSpec
    ) -> None:
        cfg = preset.train
        self.strategy = replicas.make_strategy(
            settings.workers, settings.strategy == "mirrored", settings.devices
        )
        scope = self.strategy.scope() if self.strategy else contextlib.nullcontext()
        with scope:
            self.model = GPT(preset.model, seed=cfg.seed)
        self.trainer: Trainer | replicas.ReplicatedTrainer
        if self.strategy is None:
            self.trainer = Trainer(self.model, cfg.weight_decay, HISTOGRAM_EVERY)
        else:
            self.trainer = replicas.ReplicatedTrainer(self.strategy, self.model, cfg.weight_decay)
            self.trainer.trace(cfg.batch_size, preset.model.context + 1)
        self.state = checkpoints.TrainState(preset.name, preset.fingerprint())
        self.ckpt = checkpoints.checkpoint(self.model, self.trainer.optimizer, self.state, spec)
        run = settings.run_path()
        self.shared = run / checkpoints.CHECKPOINTS
        # every worker writes (the save may synchronise them); only the chief's is kept
        self.write_dir = self.shared if role.chief else run / "workers" / str(role.index)
        self.manager = checkpoints.manager(self.ckpt, self.write_dir, settings.keep_checkpoints)

    def step(self, i: int, batch: np.ndarray, lr: float) -> float:
        """One update; the loss."""
        if isinstance(self.trainer, Trainer):
            return self.trainer.run_step(i, tf.constant(batch), lr)
        return self.trainer.run_step(i, batch, lr)

    def save(self, step: int) -> str:
        """Write a checkpoint; the chief's path prefix."""
        path = self.manager.save(checkpoint_number=step)
        if self.write_dir != self.shared:
            shutil.rmtree(self.write_dir, ignore_errors=True)
        return str(path)


def train_process(
    settings: TrainSettings, role: Role = Role(), metrics: TrainingMetrics | None = None
) -> dict[str, Any] | None:
    """Train (or resume) this process's part of the run; the chief returns the report."""
    preset, started = recipe(settings), time.perf_counter()
    cfg, run_dir = preset.train, settings.run_path()
    # a resumed run reads the vocabulary its checkpoints carry; a new one trains it
    latest = tf.train.latest_checkpoint(str(run_dir / checkpoints.CHECKPOINTS))
    spec, stream = prepare(preset, read_spec(latest) if latest else None)
    train_ids, held_ids = data.split(stream)
    rng = np.random.default_rng(cfg.seed)
    run = _Run(settings, preset, role, spec)
    start = checkpoints.restore_latest(run.ckpt, run.state, run.shared)
    run.state.restore_rng(rng)
    loss_ema = float(run.state.loss_ema.numpy())
    if start:
        log.info("resuming", step=start, worker=role.index, checkpoint=str(run.shared))
    writer = (
        tf.summary.create_file_writer(str(run_dir / TENSORBOARD))
        if role.chief
        else tf.summary.create_noop_writer()
    )
    ctx, every = preset.model.context, max(1, cfg.steps // 20)
    if metrics is not None:
        metrics.checkpoint_interval.set(settings.checkpoint_every)
    bar = tqdm(range(start, cfg.steps), desc=f"train {preset.name}", unit="step",
               initial=start, total=cfg.steps,
               disable=not (settings.progress and role.chief and role.count == 1))  # fmt: skip
    with writer.as_default():
        for i in bar:
            batch = data.windows(train_ids, ctx, cfg.batch_size, rng)
            lr, t0 = _lr(i, preset), time.perf_counter()
            loss = run.step(i, batch, lr)
            seconds = time.perf_counter() - t0
            loss_ema = loss if math.isnan(loss_ema) else 0.95 * loss_ema + 0.05 * loss
            bar.set_postfix(loss=f"{loss_ema:.3f}", bpt=f"{loss_ema / math.log(2):.2f}")
            done = i + 1
            if metrics is not None:
                metrics.step(done, cfg.batch_size, cfg.batch_size * ctx, seconds, loss,
                             run.trainer.last_norm, lr)  # fmt: skip
            shown = role.chief and (done % every == 0 or done == cfg.steps)
            level = log.info if shown else log.debug  # the other workers' steps: DEBUG
            level("step", step=done, steps=cfg.steps, loss=round(loss, 4), lr=lr, worker=role.index)
            if done % settings.checkpoint_every == 0 or done == cfg.steps:
                run.state.record(done, rng, loss_ema)
                path = run.save(done)
                if metrics is not None:
                    metrics.checkpointed()
                if role.chief:
                    log.info("checkpoint", path=path, step=done)
        if metrics is not None:
            metrics.finish()
        if not role.chief:
            return None
        held = held_out(run.model, held_ids, spec, cfg.eval_batches, cfg.eval_batch_size, rng)
        tf.summary.scalar("eval/held_out_bits_per_byte", held.bits_per_byte, step=cfg.steps)
        tf.summary.scalar("eval/held_out_bits_per_token", held.bits_per_token, step=cfg.steps)
    writer.flush()
    train_report = TrainReport(preset.name, preset.fingerprint(), cfg.steps,
                               round(time.perf_counter() - started, 1), round(loss_ema, 4),
                               round(held.bits_per_byte, 4),
                               round(data.bytes_per_token(stream, spec) * len(stream)),
                               round(held.bits_per_token, 4),
                               round(held.bytes_per_token, 4))  # fmt: skip
    report = {
        **asdict(train_report),
        "run_dir": str(run_dir),
        "checkpoint": tf.train.latest_checkpoint(str(run.shared)),
        "resumed_from_step": start,
        "workers": role.count,
        "replicas": getattr(run.trainer, "replicas", 1),
    }
    (run_dir / REPORT).write_text(json.dumps(report, indent=2))
    log.info("trained", **report)
    return report


def report_of(run_dir: Path) -> dict[str, Any]:
    """The report the chief wrote for a finished run."""
    return dict(json.loads((run_dir / REPORT).read_text()))
