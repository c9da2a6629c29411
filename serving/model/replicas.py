"""The training step under a tf.distribute strategy: one process's devices, or several workers.

Each replica takes an equal, contiguous share of the global batch (replica r: rows r*B/N up to
(r+1)*B/N) and computes its loss, the mean over its share, and the gradients of that mean (an XLA
function, as the single-process step). In the replica context the loss and the gradients are
all-reduced with SUM and divided by the number of replicas: the mean of N equal shares' means is
the global batch's mean, so the update is the one a single process makes on the whole batch.
The clipped update is then applied in the cross-replica context (the hand-written AdamW on
mirrored variables: every local copy gets the same assignment), so the weights stay in step on
every replica. Histograms are the single-process trainer's only.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from serving.model.train import AdamW, _loss
from serving.model.transformer import GPT


class ReplicaError(ValueError):
    """A layout the strategy cannot train (devices, batch split)."""


class PortTaken(RuntimeError):
    """This worker's address in TF_CONFIG was bound by another process: on one host, a loopback
    port the supervisor picked was taken before the worker's TensorFlow could bind it."""


_BIND_FAILED = "Could not start gRPC server"  # TensorFlow's UnknownError when the bind fails


def local_devices(count: int) -> list[str]:
    """`count` device names for MirroredStrategy: GPUs when there are enough, else the CPU split
    into `count` logical devices (before TensorFlow starts its runtime); 0: every GPU or the CPU."""
    # physical, not logical: listing logical devices would start the runtime
    gpus = [f"/gpu:{i}" for i, _ in enumerate(tf.config.list_physical_devices("GPU"))]
    if count == 0:
        return gpus or ["/cpu:0"]
    if len(gpus) >= count:
        return gpus[:count]
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
        )
    except RuntimeError as exc:  # the runtime is up: its devices can no longer change
        raise ReplicaError(f"cannot split the CPU into {count} devices now: {exc}") from exc
    return [d.name for d in tf.config.list_logical_devices("CPU")][:count]


def make_strategy(workers: int, mirrored: bool, devices: int) -> tf.distribute.Strategy | None:
    """MultiWorkerMirroredStrategy for several workers (TF_CONFIG names them), MirroredStrategy
    for `mirrored`, None for the single-process trainer."""
    if workers > 1:
        try:
            return tf.distribute.MultiWorkerMirroredStrategy()
        except tf.errors.UnknownError as exc:
            if _BIND_FAILED in str(exc):
                raise PortTaken(f"this worker's address could not be bound: {exc}") from None
            raise
    if mirrored:
        return tf.distribute.MirroredStrategy(devices=local_devices(devices))
    return None


class ReplicatedTrainer:
    """The distributed training step; `run_step` as `train.Trainer`'s (scalars, no histograms)."""

    def __init__(self, strategy: tf.distribute.Strategy, model: GPT, weight_decay: float) -> None:
        self.strategy = strategy
        self.replicas = strategy.num_replicas_in_sync
        with strategy.scope():  # the moments mirror the weights
            self.optimizer = AdamW(list(model.trainable_variables), weight_decay)
        self.last_norm = float("nan")
        variables, replicas = self.optimizer.variables, self.replicas

        # without autograph, as train.Trainer's step
        @tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
        def gradients(batch: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
            with tf.GradientTape() as tape:
                loss = _loss(model, batch)
            return loss, [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]

        def replica_step(batch: tf.Tensor) -> list[tf.Tensor]:
            loss, grads = gradients(batch)
            summed = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, [loss, *grads]
            )
            return [t / replicas for t in summed]

        @tf.function(reduce_retracing=True, autograph=False)
        def step(batch: tf.Tensor, lr: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            out = strategy.run(replica_step, args=(batch,))
            # after the all-reduce every replica holds the same values: take this worker's first
            loss, *grads = [strategy.experimental_local_results(t)[0] for t in out]
            grads, norm = tf.clip_by_global_norm(grads, 1.0)
            self.optimizer.apply(grads, lr)
            return loss, norm

        self.update = step

    def trace(self, batch_size: int, width: int) -> None:
        """Trace the step for global batches of this shape, before a checkpoint is restored:
        restoring traces functions of its own, which would rename this one's graph, and the
        persistent XLA cache (keyed by the graph) would then miss on every restart."""
        self.update.get_concrete_function(
            self.shares(np.zeros([batch_size, width], np.int32)), tf.constant(0.0)
        )

    def shares(self, batch: np.ndarray) -> tf.distribute.DistributedValues:
        """Each local replica's contiguous share of the global batch."""
        if len(batch) % self.replicas:
            raise ReplicaError(
                f"a batch of {len(batch)} does not split over {self.replicas} replicas"
            )
        size = len(batch) // self.replicas

        def share(ctx: tf.distribute.experimental.ValueContext) -> tf.Tensor:
            first = ctx.replica_id_in_sync_group * size
            return tf.constant(batch[first : first + size])

        return self.strategy.experimental_distribute_values_from_function(share)

    def run_step(self, i: int, batch: np.ndarray, lr: float) -> float:
        """One update on the global batch, its scalars written to the default writer; the loss."""
        loss_t, norm = self.update(self.shares(batch), tf.constant(lr))
        loss, self.last_norm = float(loss_t), float(norm)
        tf.summary.scalar("train/loss", loss, step=i)
        tf.summary.scalar("train/learning_rate", lr, step=i)
        tf.summary.scalar("train/grad_global_norm", self.last_norm, step=i)
        return loss
