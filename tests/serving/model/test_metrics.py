"""A training worker's metrics: every series from the start, one step's values, the page."""

from __future__ import annotations

import httpx
import pytest

from serving.model.metrics import PFX, TrainingMetrics
from tokenpulse.procs import free_port


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_step_sets_every_series_and_a_checkpoint_resets_its_age() -> None:
    clock = Clock()
    metrics = TrainingMetrics(worker=1, role="worker", clock=clock)
    value = metrics.registry.get_sample_value
    assert value(PFX + "global_step") == 0 and value(PFX + "examples_total") == 0
    assert value(PFX + "worker_info", {"worker": "1", "role": "worker"}) == 1
    metrics.step(7, examples=16, tokens=1024, seconds=0.5, loss=3.25, grad_norm=0.75,
                 learning_rate=1e-3)  # fmt: skip
    assert value(PFX + "global_step") == 7
    assert (value(PFX + "examples_total"), value(PFX + "tokens_total")) == (16, 1024)
    assert (value(PFX + "examples_per_second"), value(PFX + "tokens_per_second")) == (32, 2048)
    assert value(PFX + "step_duration_seconds_bucket", {"le": "0.5"}) == 1
    assert value(PFX + "step_duration_seconds_bucket", {"le": "0.25"}) == 0
    assert (value(PFX + "loss_nats"), value(PFX + "gradient_norm")) == (3.25, 0.75)
    assert value(PFX + "learning_rate") == 1e-3
    clock.now += 30
    assert value(PFX + "checkpoint_age_seconds") == 30
    metrics.checkpointed()
    clock.now += 2
    assert value(PFX + "checkpoint_age_seconds") == 2


def test_an_unknown_role_is_counted_as_a_worker() -> None:
    metrics = TrainingMetrics(worker=3, role="evaluator")
    assert (
        metrics.registry.get_sample_value(PFX + "worker_info", {"worker": "3", "role": "worker"})
        == 1
    )


def test_the_page_is_served_on_loopback() -> None:
    metrics, port = TrainingMetrics(), free_port()
    metrics.serve(port)
    page = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    assert f'{PFX}worker_info{{role="chief",worker="0"}} 1.0' in page
    assert f"# TYPE {PFX}step_duration_seconds histogram" in page


def test_finished_and_the_checkpoint_cadence_start_at_zero_until_set() -> None:
    metrics = TrainingMetrics()
    value = metrics.registry.get_sample_value
    assert (value(PFX + "finished"), value(PFX + "checkpoint_interval_steps")) == (0, 0)
    metrics.checkpoint_interval.set(50)
    metrics.finish()
    assert (value(PFX + "finished"), value(PFX + "checkpoint_interval_steps")) == (1, 50)


def test_the_page_is_served_on_the_host_given() -> None:
    """Compose's Prometheus reaches the worker by its service's address, not its loopback."""
    metrics, port = TrainingMetrics(), free_port()
    metrics.serve(port, "127.0.0.2")
    page = httpx.get(f"http://127.0.0.2:{port}/metrics", timeout=10).text
    assert f"{PFX}finished 0.0" in page
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
