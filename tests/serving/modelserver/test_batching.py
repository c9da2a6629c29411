"""The shared batch scheduler: merging, queue limits, padding, splitting, metrics."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from serving.modelserver.batching import QUEUE_FULL, BatchScheduler
from serving.modelserver.config_files import BatchingParameters
from serving.modelserver.metrics import ServingMetrics
from serving.modelserver.status import ServingError


class GatedModel:
    """A fake signature that records each call's batch and blocks until released."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.gate = threading.Event()
        self.started = threading.Event()

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.calls.append(int(inputs["x"].shape[0]))
        self.started.set()
        self.gate.wait(10)
        return {"y": inputs["x"] * 2, "s": inputs["s"]}


def rows(*values: int) -> dict[str, np.ndarray]:
    return {
        "x": np.array(values, dtype=np.int32),
        "s": np.array([f"r{v}".encode() for v in values], dtype=object),
    }


def make(**overrides: object) -> tuple[BatchScheduler, ServingMetrics]:
    params = BatchingParameters(**{"num_batch_threads": 1, **overrides})  # type: ignore[arg-type]
    metrics = ServingMetrics()
    return BatchScheduler(params, metrics), metrics


def test_requests_queued_while_busy_merge_into_one_call_and_split_back() -> None:
    scheduler, metrics = make()
    model = GatedModel()
    queue = scheduler.add_queue("m", model)
    try:
        first = queue.submit(rows(1))
        assert model.started.wait(5)
        later = [queue.submit(rows(10 + i, 20 + i)) for i in range(3)]
        model.gate.set()
        assert first.result(5)["y"].tolist() == [2]
        for i, fut in enumerate(later):
            out = fut.result(5)
            assert out["y"].tolist() == [2 * (10 + i), 2 * (20 + i)]
            assert out["s"].tolist() == [f"r{10 + i}".encode(), f"r{20 + i}".encode()]
        assert model.calls == [1, 6]
        assert metrics.wrapped_run_count.value() == 2
        assert metrics.processed_batch_size.count() == 2
        # input_batch_size is recorded per input tensor of every task
        assert metrics.input_batch_size.count() == 2 * 4
    finally:
        model.gate.set()
        scheduler.stop()


def test_open_batch_waits_for_batch_timeout_to_collect_more() -> None:
    scheduler, _ = make(batch_timeout_micros=1_000_000)
    model = GatedModel()
    model.gate.set()
    queue = scheduler.add_queue("m", model)
    try:
        futures = [queue.submit(rows(i)) for i in range(4)]
        for fut in futures:
            fut.result(5)
        assert model.calls == [4]
    finally:
        scheduler.stop()


def test_full_batch_runs_without_waiting_for_the_timeout() -> None:
    scheduler, _ = make(batch_timeout_micros=60_000_000, max_batch_size=2)
    model = GatedModel()
    model.gate.set()
    queue = scheduler.add_queue("m", model)
    try:
        assert queue.submit(rows(1, 2)).result(5)["y"].tolist() == [2, 4]
    finally:
        scheduler.stop()


def test_full_queue_is_refused_with_unavailable() -> None:
    scheduler, _ = make(max_batch_size=1, max_enqueued_batches=2)
    model = GatedModel()
    queue = scheduler.add_queue("m", model)
    try:
        running = queue.submit(rows(1))
        assert model.started.wait(5)
        queued = [queue.submit(rows(2)), queue.submit(rows(3))]  # one closed + one open batch
        with pytest.raises(ServingError) as err:
            queue.submit(rows(4))
        assert err.value.code == "UNAVAILABLE"
        assert err.value.http_status == 503
        assert err.value.message == QUEUE_FULL
        model.gate.set()
        assert [f.result(5)["y"].tolist() for f in [running, *queued]] == [[2], [4], [6]]
    finally:
        model.gate.set()
        scheduler.stop()


def test_task_larger_than_max_batch_size_is_invalid() -> None:
    scheduler, _ = make(max_batch_size=2)
    queue = scheduler.add_queue("m", GatedModel())
    try:
        with pytest.raises(ServingError) as err:
            queue.submit(rows(1, 2, 3))
        assert err.value.code == "INVALID_ARGUMENT"
        assert err.value.message == "Task size 3 is larger than maximum input batch size 2"
    finally:
        scheduler.stop()


def test_batch_is_padded_to_the_next_allowed_size_and_padding_is_dropped() -> None:
    scheduler, metrics = make(max_batch_size=8, allowed_batch_sizes=(2, 4, 8))
    model = GatedModel()
    model.gate.set()
    queue = scheduler.add_queue("m", model)
    try:
        out = queue.submit(rows(5, 6, 7)).result(5)
        assert model.calls == [4]
        assert out["y"].tolist() == [10, 12, 14]
        text = metrics.render()
        assert ':padding_size_count{execution_batch_size="4"} 1' in text
        assert ':padding_size_sum{execution_batch_size="4"} 1' in text
    finally:
        scheduler.stop()


def test_variable_length_inputs_need_padding_enabled() -> None:
    def run(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"y": inputs["x"].sum(axis=1)}

    for pad, expect_ok in [(False, False), (True, True)]:
        # max_batch_size 2: the batch runs as soon as both tasks joined it
        scheduler, _ = make(
            pad_variable_length_inputs=pad, batch_timeout_micros=30_000_000, max_batch_size=2
        )
        queue = scheduler.add_queue("m", run)
        try:
            a = queue.submit({"x": np.array([[1, 2]], dtype=np.int32)})
            b = queue.submit({"x": np.array([[3, 4, 5]], dtype=np.int32)})
            if expect_ok:
                # padding repeats the tensor's first element (TF: "existing values")
                assert a.result(5)["y"].tolist() == [1 + 2 + 1]
                assert b.result(5)["y"].tolist() == [12]
            else:
                with pytest.raises(ServingError) as err:
                    a.result(5)
                assert "pad_variable_length_inputs" in err.value.message
        finally:
            scheduler.stop()


def test_inputs_with_different_batch_sizes_are_rejected() -> None:
    scheduler, _ = make()
    queue = scheduler.add_queue("m", GatedModel())
    try:
        with pytest.raises(ServingError) as err:
            queue.submit({"x": np.zeros(2, np.int32), "s": np.zeros(3, object)})
        assert "equal 0th-dimension size" in err.value.message
    finally:
        scheduler.stop()


def test_a_failing_call_fails_every_task_of_its_batch() -> None:
    def boom(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        time.sleep(0.05)
        raise ServingError("INVALID_ARGUMENT", "bad row")

    scheduler, _ = make(batch_timeout_micros=100_000)
    queue = scheduler.add_queue("m", boom)
    try:
        futures = [queue.submit(rows(i)) for i in range(3)]
        for fut in futures:
            with pytest.raises(ServingError, match="bad row"):
                fut.result(5)
        assert queue.pending() == 0
    finally:
        scheduler.stop()


def test_empty_tasks_are_answered_empty_and_never_break_padding() -> None:
    scheduler, _ = make(max_batch_size=8, allowed_batch_sizes=(2, 4, 8))
    model = GatedModel()
    queue = scheduler.add_queue("m", model)
    try:
        first = queue.submit(rows(1))
        assert model.started.wait(5)
        # queued while the thread is busy: merged as [5, 6, 7] + [] and padded to 4
        full, empty = queue.submit(rows(5, 6, 7)), queue.submit(rows())
        model.gate.set()
        assert first.result(5)["y"].tolist() == [2]
        assert full.result(5)["y"].tolist() == [10, 12, 14]
        assert empty.result(5)["y"].shape == (0,)
        assert model.calls == [2, 4]
        assert queue.submit(rows()).result(5)["s"].shape == (0,)  # an empty batch alone
    finally:
        scheduler.stop()
