"""Training checkpoints: weights, optimiser moments, and where the run stands (step, recipe, data).

A run directory keeps its checkpoints in `checkpoints/` (`ckpt-<step>`, the newest M, through
`tf.train.CheckpointManager`). Besides the weights, the optimiser and the vocabulary
(`tokenizer.SavedSpec`: export and a resumed run read it) each carries a `TrainState`: the
global step, the preset and recipe fingerprint it was trained under (a resume with another
recipe is refused), the numpy generator's state after the step's batch (the data position: a
resumed run draws the windows an unbroken one draws) and the running loss average.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import tensorflow as tf

from serving.model.bpe import BpeSpec
from serving.model.tokenizer import SavedSpec
from serving.model.train import AdamW
from serving.model.transformer import GPT

CHECKPOINTS = "checkpoints"
PREFIX = "ckpt"
_STATE_KEY = "state/{}/.ATTRIBUTES/VARIABLE_VALUE"


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable or from another recipe."""


class TrainState(tf.Module):
    """The run's position, saved with every checkpoint (plain variables, never mirrored)."""

    def __init__(self, preset: str, fingerprint: str) -> None:
        super().__init__(name="train_state")
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.preset = tf.Variable(preset, trainable=False, name="preset")
        self.fingerprint = tf.Variable(fingerprint, trainable=False, name="fingerprint")
        self.data_position = tf.Variable("", trainable=False, name="data_position")
        self.loss_ema = tf.Variable(float("nan"), trainable=False, name="loss_ema")

    def record(self, step: int, rng: np.random.Generator, loss_ema: float) -> None:
        """Where the run stands after `step` steps."""
        self.step.assign(step)
        self.data_position.assign(json.dumps(rng.bit_generator.state))
        self.loss_ema.assign(loss_ema)

    def restore_rng(self, rng: np.random.Generator) -> None:
        """Put the generator back where the checkpoint left it."""
        text = self.data_position.numpy().decode()
        if text:
            rng.bit_generator.state = json.loads(text)


class _Moments(tf.Module):
    """The hand-written AdamW's moments and step count, as checkpointable attributes."""

    def __init__(self, optimizer: AdamW) -> None:
        super().__init__(name="optimizer")
        self.m, self.v, self.t = optimizer.m, optimizer.v, optimizer.t


def checkpoint(
    model: GPT, optimizer: AdamW, state: TrainState, spec: BpeSpec
) -> tf.train.Checkpoint:
    """The object graph a training checkpoint saves (the vocabulary too: export reads it)."""
    return tf.train.Checkpoint(
        model=model, optimizer=_Moments(optimizer), state=state, tokenizer=SavedSpec(spec)
    )


def manager(ckpt: tf.train.Checkpoint, directory: Path, keep: int) -> tf.train.CheckpointManager:
    """Keeps the newest `keep` checkpoints in `directory`."""
    return tf.train.CheckpointManager(
        ckpt, str(directory), max_to_keep=keep, checkpoint_name=PREFIX
    )


def read_state(prefix: str) -> dict[str, object]:
    """The step, preset and fingerprint a checkpoint was written with."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        keys = ("step", "preset", "fingerprint")
        values = {k: reader.get_tensor(_STATE_KEY.format(k)) for k in keys}
    except (tf.errors.OpError, ValueError) as exc:
        raise CheckpointError(f"{prefix} is not a training checkpoint") from exc
    return {
        "step": int(values["step"]),
        "preset": values["preset"].decode(),
        "fingerprint": values["fingerprint"].decode(),
    }


def restore_latest(ckpt: tf.train.Checkpoint, state: TrainState, directory: Path) -> int:
    """Restore the newest checkpoint in `directory` (if any) into `ckpt`; the step it holds.

    A checkpoint of another recipe is refused: its step count, schedule or shapes differ."""
    prefix = tf.train.latest_checkpoint(str(directory))
    if prefix is None:
        return 0
    found = read_state(prefix)
    wanted = state.fingerprint.numpy().decode()
    if found["fingerprint"] != wanted:
        raise CheckpointError(
            f"{directory} holds a run of another recipe ({found['preset']} "
            f"{found['fingerprint']}, not {wanted}): give another --run-dir or remove it"
        )
    ckpt.restore(prefix).assert_existing_objects_matched()
    return int(state.step.numpy())


def resolve(spec: str, run_dir: Path) -> str:
    """A checkpoint's path prefix from `latest`, a directory of checkpoints or a prefix."""
    if spec == "latest":
        directory = run_dir / CHECKPOINTS
        prefix = tf.train.latest_checkpoint(str(directory))
        if prefix is None:
            raise CheckpointError(f"no checkpoints in {directory}")
        return prefix
    path = Path(spec)
    if path.is_dir():
        for directory in (path, path / CHECKPOINTS):
            prefix = tf.train.latest_checkpoint(str(directory))
            if prefix is not None:
                return prefix
        raise CheckpointError(f"no checkpoints in {path}")
    if not Path(f"{spec}.index").exists():
        raise CheckpointError(f"no checkpoint at {spec}")
    return spec


def load_weights(model: GPT, prefix: str) -> None:
    """Read only the model's weights from a training checkpoint."""
    try:
        tf.train.Checkpoint(model=model).read(
            prefix
        ).expect_partial().assert_existing_objects_matched()
    except (tf.errors.OpError, AssertionError, ValueError) as exc:
        raise CheckpointError(f"{prefix} does not fit the model: {exc}") from exc
