"""Every training metric, declared once with explicit buckets; the loop calls `step(...)`.

Each worker serves its own page (`--metrics-port` + its index): the global step, examples and
tokens (counters, and the last step's rate), the step time, loss, gradient norm (before
clipping), learning rate, the seconds since this run's last checkpoint (from the start until the
first) and the checkpoint cadence in steps, whether the worker finished its last step (`finished`
1: the alerts tell a run that ended on purpose from a dead or stalled one), and one
`..._worker_info` series naming the worker's index and role (`chief` or `worker`, a closed
set). All series exist from the start.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

PFX = "tokenpulse_training_"
STEP_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip
ROLES = ("chief", "worker")


class TrainingMetrics:
    """The training loop's series in one registry."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        worker: int = 0,
        role: str = "chief",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=False)
        r, self._clock = self.registry, clock
        self._checkpointed = clock()
        self.global_step = Gauge(PFX + "global_step", "Steps the run has completed.", registry=r)
        self.examples = Counter(PFX + "examples", "Training windows processed (global batch).",
                                registry=r)  # fmt: skip
        self.tokens = Counter(PFX + "tokens", "Training tokens processed (global batch).",
                              registry=r)  # fmt: skip
        self.examples_rate = Gauge(PFX + "examples_per_second", "Examples per second, last step.",
                                   registry=r)  # fmt: skip
        self.tokens_rate = Gauge(PFX + "tokens_per_second", "Tokens per second, last step.",
                                 registry=r)  # fmt: skip
        self.step_seconds = Histogram(PFX + "step_duration_seconds", "Wall time of one step.",
                                      buckets=STEP_BUCKETS, registry=r)  # fmt: skip
        self.loss = Gauge(PFX + "loss_nats", "Training loss of the last step, nats per token.",
                          registry=r)  # fmt: skip
        self.grad_norm = Gauge(PFX + "gradient_norm", "Global gradient norm before clipping.",
                               registry=r)  # fmt: skip
        self.learning_rate = Gauge(PFX + "learning_rate", "Learning rate of the last step.",
                                   registry=r)  # fmt: skip
        since = Gauge(PFX + "checkpoint_age_seconds",
                      "Seconds since the last checkpoint (or the start).", registry=r)  # fmt: skip
        since.set_function(lambda: self._clock() - self._checkpointed)
        self.checkpoint_interval = Gauge(PFX + "checkpoint_interval_steps",
                                         "Steps between checkpoints (--checkpoint-every).",
                                         registry=r)  # fmt: skip
        self.finished = Gauge(PFX + "finished",
                              "1 once this worker has completed the run's last step, else 0.",
                              registry=r)  # fmt: skip
        info = Gauge(PFX + "worker_info", "This worker's index and role.", ("worker", "role"),
                     registry=r)  # fmt: skip
        info.labels(worker=str(worker), role=role if role in ROLES else "worker").set(1)

    def step(self, step: int, examples: int, tokens: int, seconds: float, loss: float,
             grad_norm: float, learning_rate: float) -> None:  # fmt: skip
        """Record one completed step (`step`: the global step after it)."""
        self.global_step.set(step)
        self.examples.inc(examples)
        self.tokens.inc(tokens)
        if seconds > 0:
            self.examples_rate.set(examples / seconds)
            self.tokens_rate.set(tokens / seconds)
        self.step_seconds.observe(seconds)
        self.loss.set(loss)
        self.grad_norm.set(grad_norm)
        self.learning_rate.set(learning_rate)

    def checkpointed(self) -> None:
        """A checkpoint was just written."""
        self._checkpointed = self._clock()

    def finish(self) -> None:
        """The run's last step is done: a worker that stops now stopped on purpose."""
        self.finished.set(1)

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Serve the page on `host`:`port` (a daemon thread)."""
        start_http_server(port, addr=host, registry=self.registry)
