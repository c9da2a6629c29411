"""Server-wide dynamic batching with TF's SharedBatchScheduler + BatchingSession semantics.

One scheduler (a pool of `num_batch_threads` threads) is shared by every queue; each loaded
version/signature has its own queue. A queue holds closed batches plus one open batch; a task
joins the open batch if it fits in `max_batch_size`, otherwise a new batch opens, unless the queue
already holds `max_enqueued_batches` (then UNAVAILABLE). An idle thread takes a full batch, or the
open one once `batch_timeout_micros` passed since its first task (0: at once). The merged batch is
padded up to the next `allowed_batch_sizes` entry by repeating a row, run once, then split back.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field

import numpy as np

from serving.modelserver.config_files import BatchingParameters
from serving.modelserver.metrics import ServingMetrics
from serving.modelserver.status import ServingError, failed_precondition, invalid_argument

Tensors = dict[str, np.ndarray]
RunFn = Callable[[Tensors], Tensors]

QUEUE_FULL = "The batch scheduling queue to which this task was submitted is full"


def task_size(inputs: Tensors) -> int:
    """The 0th-dimension size shared by every input tensor of one request."""
    sizes = set()
    for arr in inputs.values():
        if arr.ndim == 0:
            raise invalid_argument("Batching Run() input tensors must have at least one dimension")
        sizes.add(int(arr.shape[0]))
    if len(sizes) != 1:
        raise invalid_argument("Batching Run() input tensors must have equal 0th-dimension size")
    return sizes.pop()


@dataclass
class _Task:
    inputs: Tensors
    size: int
    future: Future[Tensors]
    enqueued: float = field(default_factory=time.perf_counter)


@dataclass
class _Batch:
    tasks: list[_Task] = field(default_factory=list)
    size: int = 0
    opened: float = 0.0


class BatchQueue:
    """The queue of one servable signature; submit() returns a Future of the task's outputs."""

    def __init__(self, scheduler: BatchScheduler, name: str, run_fn: RunFn) -> None:
        self.name = name
        self._scheduler = scheduler
        self._run_fn = run_fn
        self.closed: deque[_Batch] = deque()
        self.open = _Batch()
        self.in_flight = 0

    def submit(self, inputs: Tensors) -> Future[Tensors]:
        """Enqueue one request's inputs; raises ServingError when it cannot be queued."""
        return self._scheduler.submit(self, inputs)

    def pending(self) -> int:
        """Tasks queued or running."""
        with self._scheduler.cond:
            return sum(len(b.tasks) for b in self.closed) + len(self.open.tasks) + self.in_flight


class BatchScheduler:
    """The shared pool of batch threads."""

    def __init__(self, params: BatchingParameters, metrics: ServingMetrics) -> None:
        self.params = params
        self.metrics = metrics
        self.cond = threading.Condition()
        self._queues: list[BatchQueue] = []
        self._next = 0
        self._stopping = False
        self._threads = [
            threading.Thread(target=self._work, name=f"batch-{i}", daemon=True)
            for i in range(params.num_batch_threads)
        ]
        for t in self._threads:
            t.start()

    def add_queue(self, name: str, run_fn: RunFn) -> BatchQueue:
        """A new queue served by this pool."""
        queue = BatchQueue(self, name, run_fn)
        with self.cond:
            self._queues.append(queue)
        return queue

    def remove_queue(self, queue: BatchQueue) -> None:
        """Stop serving a queue once every task in it is done."""
        with self.cond:
            while queue.closed or queue.open.tasks or queue.in_flight:
                self.cond.wait(0.05)
            if queue in self._queues:
                self._queues.remove(queue)

    def stop(self) -> None:
        """Let the threads finish queued work and exit."""
        with self.cond:
            self._stopping = True
            self.cond.notify_all()
        for t in self._threads:
            t.join(timeout=30)

    def submit(self, queue: BatchQueue, inputs: Tensors) -> Future[Tensors]:
        """TF's Schedule(): size checks, then join the open batch or open a new one."""
        size = task_size(inputs)
        p = self.params
        if size > p.max_batch_size:
            raise invalid_argument(
                f"Task size {size} is larger than maximum input batch size {p.max_batch_size}"
            )
        for _ in inputs:
            self.metrics.input_batch_size.observe(size)
        self.metrics.batch_recorded()
        task = _Task(inputs, size, Future())
        with self.cond:
            if queue.open.size + size > p.max_batch_size:
                if len(queue.closed) + 1 >= p.max_enqueued_batches:
                    raise ServingError("UNAVAILABLE", QUEUE_FULL)
                queue.closed.append(queue.open)
                queue.open = _Batch()
            if not queue.open.tasks:
                queue.open.opened = task.enqueued
            queue.open.tasks.append(task)
            queue.open.size += size
            self.cond.notify()
        return task.future

    def _take(self) -> tuple[BatchQueue, _Batch] | float | None:
        """A ready batch, else the seconds until the earliest open batch times out (or None)."""
        timeout_s = self.params.batch_timeout_micros / 1e6
        now = time.perf_counter()
        wait: float | None = None
        n = len(self._queues)
        for i in range(n):
            queue = self._queues[(self._next + i) % n]
            if queue.closed:
                batch = queue.closed.popleft()
            elif queue.open.tasks and (
                queue.open.size >= self.params.max_batch_size
                or now >= queue.open.opened + timeout_s
            ):
                batch, queue.open = queue.open, _Batch()
            else:
                if queue.open.tasks:
                    left = queue.open.opened + timeout_s - now
                    wait = left if wait is None else min(wait, left)
                continue
            self._next = (self._next + i + 1) % max(n, 1)
            queue.in_flight += len(batch.tasks)
            return queue, batch
        return wait

    def _work(self) -> None:
        while True:
            with self.cond:
                while True:
                    taken = self._take()
                    if isinstance(taken, tuple):
                        break
                    if self._stopping and taken is None:
                        return
                    self.cond.wait(taken if taken is not None else 0.5)
            queue, batch = taken
            try:
                self._process(queue, batch)
            finally:
                with self.cond:
                    queue.in_flight -= len(batch.tasks)
                    self.cond.notify_all()

    def _process(self, queue: BatchQueue, batch: _Batch) -> None:
        start = time.perf_counter()
        for task in batch.tasks:
            self.metrics.queuing_latency.observe(int((start - task.enqueued) * 1e6), "")
        try:
            padded = _padded_size(self.params.allowed_batch_sizes, batch.size)
            padding = padded - batch.size
            self.metrics.padding_size.observe(padding, str(padded))
            self.metrics.processed_batch_size.observe(padded)
            merged = _merge(batch.tasks, padding, self.params.pad_variable_length_inputs)
            self.metrics.wrapped_run_count.inc()
            outputs = queue._run_fn(merged)
            parts = _split(outputs, [t.size for t in batch.tasks], padded)
        except Exception as exc:  # every task of a failed batch gets the same error
            err = exc if isinstance(exc, ServingError) else ServingError("INTERNAL", str(exc))
            for task in batch.tasks:
                _settle(task.future, error=err)
            return
        for task, part in zip(batch.tasks, parts, strict=True):
            _settle(task.future, result=part)


def _settle(
    future: Future[Tensors], result: Tensors | None = None, error: Exception | None = None
) -> None:
    """Complete a task's future unless its caller gave up (deadline) and cancelled it."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result if result is not None else {})
    except InvalidStateError:
        pass


def _padded_size(allowed: tuple[int, ...], size: int) -> int:
    if size == 0:
        return 0  # a batch of empty tasks: nothing to pad, and no row to pad with
    for candidate in allowed:
        if candidate >= size:
            return candidate
    return size


def _pad_to(arr: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    if arr.shape[1:] == dims:
        return arr
    widths = [(0, 0)] + [(0, want - have) for have, want in zip(arr.shape[1:], dims, strict=True)]
    # TF pads with the tensor's own first element ("using existing values in padding").
    return np.pad(arr, widths, mode="constant", constant_values=arr.reshape(-1)[0])


def _merge(tasks: list[_Task], padding: int, pad_variable: bool) -> Tensors:
    merged: Tensors = {}
    for name in tasks[0].inputs:
        parts = [t.inputs[name] for t in tasks]
        if any(name not in t.inputs for t in tasks):
            raise invalid_argument("tasks in one batch must have the same inputs")
        dims = parts[0].shape[1:]
        if any(p.ndim != parts[0].ndim for p in parts):
            raise failed_precondition(f"Tensors with name '{name}' have different ranks")
        if pad_variable:
            target = tuple(max(p.shape[d] for p in parts) for d in range(1, parts[0].ndim))
            parts = [_pad_to(p, target) for p in parts]
        elif any(p.shape[1:] != dims for p in parts):
            raise failed_precondition(
                f"Tensors with name '{name}' from different tasks have different shapes and "
                "padding is turned off. Set pad_variable_length_inputs to true, or ensure that "
                "all tensors with the same name have equal dimensions starting with the first dim."
            )
        if padding:
            # TF repeats the first row of the last task's tensor (the last with a row: an empty
            # task has none to repeat).
            last = next(p for p in reversed(parts) if len(p))
            parts.append(np.repeat(last[:1], padding, axis=0))
        merged[name] = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
    return merged


def _split(outputs: Tensors, sizes: list[int], padded: int) -> list[Tensors]:
    for arr in outputs.values():
        if arr.ndim == 0:
            raise failed_precondition("Batched output tensor has 0 dimensions")
        if arr.shape[0] != padded:
            raise failed_precondition(
                "Batched output tensor's 0th dimension does not equal the sum of the 0th "
                "dimension sizes of the input tensors"
            )
    parts: list[Tensors] = []
    start = 0
    for size in sizes:
        parts.append({k: v[start : start + size] for k, v in outputs.items()})
        start += size
    return parts
