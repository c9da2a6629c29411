"""Predict, shared by REST, gRPC and warmup: validate against the signature, run, record latency.

With batching on, requests go through the version's batch queue; with it off, each request calls
the signature on its own thread, as TF Serving does.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from serving.modelserver.batching import BatchQueue, BatchScheduler, task_size
from serving.modelserver.metrics import ServingMetrics
from serving.modelserver.servable import Servable, SignatureInfo, read_warmup_records
from serving.modelserver.status import ServingError, invalid_argument
from serving.modelserver.tensors import numpy_to_proto, proto_to_numpy
from tokenpulse.logging import get_logger

log = get_logger(__name__)
Tensors = dict[str, np.ndarray]


def check_inputs(sig: SignatureInfo, inputs: Tensors) -> None:
    """TF Serving's VerifyRequestInputsSize: the request's input aliases equal the signature's."""
    sent, wanted = set(inputs), set(sig.inputs)
    if sent != wanted:
        raise invalid_argument(
            f"input size does not match signature: {len(sent)}!={len(wanted)} "
            f"len({{{','.join(sorted(sent))}}}) != len({{{','.join(sorted(wanted))}}}). "
            f"Sent extra: {{{','.join(sorted(sent - wanted))}}}. "
            f"Missing but required: {{{','.join(sorted(wanted - sent))}}}."
        )


def check_output_filter(sig: SignatureInfo, output_filter: list[str]) -> list[str]:
    """The outputs to return: the filter (validated) or every signature output."""
    seen: set[str] = set()
    for alias in output_filter:
        if alias not in sig.outputs:
            raise invalid_argument(
                f"output tensor alias not found in signature: {alias} Outputs expected to be "
                f"in the set {{{','.join(sorted(sig.outputs))}}}."
            )
        if alias in seen:
            raise invalid_argument(f"duplicate output tensor alias: {alias}")
        seen.add(alias)
    return list(output_filter) or sorted(sig.outputs)


class Predictor:
    """Runs signatures, batched (shared scheduler) or not (a thread per request)."""

    def __init__(self, metrics: ServingMetrics, scheduler: BatchScheduler | None) -> None:
        self.metrics = metrics
        self.scheduler = scheduler
        self._queues: dict[tuple[int, str], BatchQueue] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="predict")

    def _queue(self, servable: Servable, signature: str) -> BatchQueue:
        key = (id(servable), signature)
        queue = self._queues.get(key)
        if queue is None and self.scheduler is not None:
            with self._lock:
                queue = self._queues.get(key)
                if queue is None:
                    queue = self.scheduler.add_queue(
                        f"{servable.name}/{servable.version}/{signature}",
                        lambda merged: servable.run(signature, merged),
                    )
                    self._queues[key] = queue
        if queue is None:
            raise ServingError("INTERNAL", "batching is off")
        return queue

    def submit(self, servable: Servable, signature: str, inputs: Tensors) -> Future[Tensors]:
        """Start one signature call; the Future holds every output of this request's rows."""
        sig = servable.signature(signature)
        check_inputs(sig, inputs)
        if self.scheduler is not None:
            return self._queue(servable, sig.name).submit(inputs)
        return self._pool.submit(servable.run, sig.name, inputs)

    async def run_async(
        self, model_name: str, servable: Servable, signature: str, inputs: Tensors
    ) -> Tensors:
        """Run on the event loop's behalf; records runtime_latency like `session->Run`."""
        start = time.perf_counter()
        future = self.submit(servable, signature, inputs)
        outputs = await asyncio.wrap_future(future)
        self.metrics.runtime_latency.observe(
            int((time.perf_counter() - start) * 1e6), model_name, "Predict", "TF1"
        )
        return outputs

    def run_sync(
        self, model_name: str, servable: Servable, signature: str, inputs: Tensors
    ) -> Tensors:
        """Blocking variant (warmup)."""
        start = time.perf_counter()
        outputs = self.submit(servable, signature, inputs).result()
        self.metrics.runtime_latency.observe(
            int((time.perf_counter() - start) * 1e6), model_name, "Predict", "TF1"
        )
        return outputs

    def forget(self, servable: Servable) -> None:
        """Drain and drop a version's batch queues (on unload)."""
        for key in [k for k in self._queues if k[0] == id(servable)]:
            queue = self._queues.pop(key)
            if self.scheduler is not None:
                self.scheduler.remove_queue(queue)

    def warmup(self, servable: Servable) -> None:
        """Replay `assets.extra/tf_serving_warmup_requests` before the version turns AVAILABLE."""
        from tensorflow_serving.apis import prediction_log_pb2

        path = servable.warmup_path()
        if not path.exists():
            log.info("no warmup data file found", path=str(path))
            return
        start = time.perf_counter()
        records = read_warmup_records(path)
        for number, record in enumerate(records, start=1):
            entry = prediction_log_pb2.PredictionLog.FromString(record)
            if entry.WhichOneof("log_type") != "predict_log":
                raise invalid_argument("Unsupported log_type for warmup")
            request = entry.predict_log.request
            inputs = request_inputs(request)
            self._check_warmup_size(path, number, inputs)
            self.run_sync(
                request.model_spec.name, servable, request.model_spec.signature_name, inputs
            )
        model_path = str(servable.path)
        self.metrics.model_warmup_latency.observe(
            int((time.perf_counter() - start) * 1e6), model_path, "OK"
        )
        self.metrics.model_warmup_records_read.inc(model_path, "OK", amount=len(records))
        log.info("warmup done", path=str(path), records=len(records))

    def _check_warmup_size(self, path: Path, number: int, inputs: Tensors) -> None:
        """A warmup record the batch queue would refuse fails the load with the way out."""
        if self.scheduler is None:
            return
        limit = self.scheduler.params.max_batch_size
        size = task_size(inputs)
        if size > limit:
            raise invalid_argument(
                f"Task size {size} is larger than maximum input batch size {limit}: warmup "
                f"record {number} of {path} has batch size {size}, above the batching "
                f"parameters' max_batch_size {limit}. Re-export the version with warmup batch "
                f"sizes up to {limit} (tokenpulse model build --warmup-batch-sizes, or pass the "
                "serving batching file) or raise max_batch_size"
            )

    def close(self) -> None:
        """Stop the non-batching pool."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def request_inputs(request: Any) -> Tensors:
    """A PredictRequest's inputs as numpy arrays."""
    return {alias: proto_to_numpy(proto) for alias, proto in request.inputs.items()}


def fill_response(
    response: Any, servable: Servable, sig: SignatureInfo, outputs: Tensors, wanted: list[str]
) -> None:
    """PredictResponse: model_spec (name, version, signature) and the wanted outputs."""
    response.model_spec.name = servable.name
    response.model_spec.version.value = servable.version
    response.model_spec.signature_name = sig.name
    for alias in wanted:
        if alias not in outputs:
            raise ServingError("UNKNOWN", "Predict internal error")
        response.outputs[alias].CopyFrom(numpy_to_proto(outputs[alias], sig.outputs[alias]))
