"""One loaded model version: its SavedModel, signature defs, calls, warmup and reference count."""

from __future__ import annotations

import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from serving.modelserver.metrics import ServingMetrics
from serving.modelserver.status import ServingError, failed_precondition, invalid_argument
from serving.modelserver.tensors import dtype_name
from tokenpulse.tfserving.contract import refusal, signature_specs
from tokenpulse.tfserving.ops import meta_graph_ops, register_tf_text_ops
from tokenpulse.tfserving.predict import DEFAULT_SIGNATURE
from tokenpulse.tfserving.signature import MAX_WARMUP_RECORDS, WARMUP_FILE


class LoadError(Exception):
    """A version that could not be loaded (bad SavedModel, failed warmup)."""


class ContractError(LoadError):
    """A complete SavedModel the gateway could not serve: a retry would fail the same way."""


@dataclass(frozen=True)
class SignatureInfo:
    """Inputs and outputs of one signature: alias -> DataType enum."""

    name: str
    inputs: dict[str, int]
    outputs: dict[str, int]


def read_meta_graph(path: Path) -> Any:
    """The `serve` MetaGraphDef of a SavedModel directory (signature defs as protos)."""
    from tensorflow.core.protobuf import saved_model_pb2

    pb = path / "saved_model.pb"
    try:
        model = saved_model_pb2.SavedModel.FromString(pb.read_bytes())
    except (OSError, Exception) as exc:
        raise LoadError(f"SavedModel load for tags {{ serve }}; Status: fail: {exc}") from exc
    for meta in model.meta_graphs:
        if "serve" in meta.meta_info_def.tags:
            return meta
    raise LoadError(
        f"Could not find meta graph def matching supplied tags: {{ serve }}. "
        f"To inspect available tag-sets in the SavedModel, please use the SavedModel CLI: "
        f"`saved_model_cli` at {path}"
    )


def read_warmup_records(path: Path) -> list[bytes]:
    """Records of an uncompressed TFRecord file (length-prefixed, CRC framed)."""
    data = path.read_bytes()
    records: list[bytes] = []
    offset = 0
    while offset < len(data):
        if offset + 12 > len(data):
            raise LoadError(f"truncated record in {path}")
        (length,) = struct.unpack_from("<Q", data, offset)
        start = offset + 12
        end = start + length
        if end + 4 > len(data):
            raise LoadError(f"truncated record in {path}")
        records.append(data[start:end])
        offset = end + 4
        if len(records) > MAX_WARMUP_RECORDS:
            raise LoadError(
                f"Number of warmup records exceeds the maximum ({MAX_WARMUP_RECORDS}) at {path}"
            )
    return records


class Servable:
    """A loaded version; `acquire()`/`release()` count in-flight requests so unload can wait."""

    def __init__(self, name: str, version: int, path: Path, metrics: ServingMetrics) -> None:
        self.name = name
        self.version = version
        self.path = path
        self.metrics = metrics
        self.meta_graph: Any = None
        self.signatures: dict[str, SignatureInfo] = {}
        self._functions: dict[str, Any] = {}
        self._model: Any = None
        self._refs = 0
        self._cond = threading.Condition()

    def load(self) -> None:
        """Load the SavedModel (TF's load metrics recorded under the version's path), refusing
        one that breaks the serving contract with one line naming what is missing."""
        import tensorflow as tf

        model_path = str(self.path)
        start = time.perf_counter()
        status = "fail"
        try:
            self.meta_graph = read_meta_graph(self.path)
            if why := refusal(signature_specs(self.meta_graph)):
                raise ContractError(why)  # refused before TF loads what the gateway cannot use
            # the stock server links TF.Text's ops in; a tokenizer in the graph uses them
            register_tf_text_ops(meta_graph_ops(self.meta_graph))
            self._model = tf.saved_model.load(model_path, tags=["serve"])
            status = "success"
        except ContractError:
            raise
        except Exception as exc:
            raise LoadError(str(exc).splitlines()[0] if str(exc) else repr(exc)) from exc
        finally:
            # TF counts every attempt and adds its latency whatever the outcome
            self.metrics.load_attempt_count.inc(model_path, status)
            elapsed_us = int((time.perf_counter() - start) * 1e6)
            self.metrics.load_latency.inc(model_path, amount=elapsed_us)
        for key, sig in self.meta_graph.signature_def.items():
            self.signatures[key] = SignatureInfo(
                key,
                {a: int(t.dtype) for a, t in sig.inputs.items()},
                {a: int(t.dtype) for a, t in sig.outputs.items()},
            )
            if key in self._model.signatures:
                self._functions[key] = self._model.signatures[key]

    def signature(self, name: str) -> SignatureInfo:
        """The signature called `name` ('' = serving_default), or FAILED_PRECONDITION."""
        key = name or DEFAULT_SIGNATURE
        sig = self.signatures.get(key)
        if sig is None or key not in self._functions:
            raise failed_precondition(f'Serving signature key "{key}" not found.')
        return sig

    def run(self, signature_name: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One call of the signature function (a TF graph run), all outputs as numpy."""
        import tensorflow as tf

        sig = self.signature(signature_name)
        fn = self._functions[sig.name]
        tensors = {}
        for i, (alias, dtype) in enumerate(sorted(sig.inputs.items())):
            arr = inputs[alias]
            if _dtype_of(arr) != dtype:
                raise invalid_argument(
                    f"Expects arg[{i}] to be {dtype_name(dtype)} but "
                    f"{dtype_name(_dtype_of(arr))} is provided"
                )
            tensors[alias] = tf.constant(arr, dtype=tf.as_dtype(dtype))
        start = time.perf_counter()
        try:
            result = fn(**tensors)
        except tf.errors.OpError as exc:
            raise ServingError(_code_name(exc.error_code), exc.message) from exc
        except (TypeError, ValueError) as exc:
            raise invalid_argument(str(exc).splitlines()[0]) from exc
        finally:
            self.metrics.graph_runs.inc()
            self.metrics.graph_run_time_usecs.inc(amount=int((time.perf_counter() - start) * 1e6))
        return {k: v.numpy() for k, v in result.items()}

    def warmup_path(self) -> Path:
        """Where this version's warmup records live."""
        return self.path / WARMUP_FILE

    def acquire(self) -> None:
        """Count one request in flight."""
        with self._cond:
            self._refs += 1

    def release(self) -> None:
        """A request finished."""
        with self._cond:
            self._refs -= 1
            self._cond.notify_all()

    def wait_idle(self, timeout_s: float = 300.0) -> bool:
        """Block until no request holds this version."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._refs > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def unload(self) -> None:
        """Drop the TF objects."""
        self._functions.clear()
        self._model = None


_NP_TO_DTYPE = {
    np.dtype(np.float32): 1,
    np.dtype(np.float64): 2,
    np.dtype(np.int32): 3,
    np.dtype(np.uint8): 4,
    np.dtype(np.int16): 5,
    np.dtype(np.int8): 6,
    np.dtype(np.int64): 9,
    np.dtype(np.bool_): 10,
    np.dtype(np.uint32): 22,
    np.dtype(np.uint64): 23,
}


def _dtype_of(arr: np.ndarray) -> int:
    if arr.dtype == object or arr.dtype.kind in "SU":
        return 7
    return _NP_TO_DTYPE.get(arr.dtype, 0)


def _code_name(code: int) -> str:
    from serving.modelserver.status import CODE_NUMBER

    for name, number in CODE_NUMBER.items():
        if number == code:
            return name if name != "OK" else "UNKNOWN"
    return "UNKNOWN"
