"""Export a trained model as `BASE/<version>/`: SavedModel, warmup records, golden canaries."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import tensorflow as tf

from serving.model.bpe import BpeSpec
from serving.model.generate import Generator
from serving.model.tokenizer import bpe_vocab
from serving.model.train import TrainReport
from serving.model.transformer import GPT
from serving.model.warmup import DEFAULT_WARMUP_BATCH_SIZES
from tokenpulse.logging import get_logger
from tokenpulse.tfserving import signature as sig
from tokenpulse.tfserving.ops import load_saved_model

log = get_logger(__name__)

# Fixed prompts: greedy outputs of each version become that version's canary expectations.
CANARY_PROMPTS = (
    "The assert statement",
    "Return the number of",
    "If the argument is",
    "This module provides",
    "The default value is",
)
CANARY_MAX_NEW_TOKENS = 24
WARMUP_MAX_NEW_TOKENS = 4
WARMUP_CONTINUE_CHUNK = 4


class ExportError(RuntimeError):
    """The export could not be written."""


def degraded_copy(model: GPT, noise: float, seed: int = 7) -> GPT:
    """A copy of `model` whose block matrices carry Gaussian noise of `noise` x each row's norm.

    Every noised row is scaled back to its original norm: plain additive noise inflates the
    weights and makes a broken model *more* confident (it falls into a loop), which would hide
    it from an NLL alert. Embeddings stay intact, so the model still reads and writes bytes; it
    just uses context worse, as after a bad checkpoint or a broken cast.
    """
    clone = GPT(model.cfg)
    clone.assign_from(model)
    rng = np.random.default_rng(seed)
    for src_blk, dst_blk in zip(model.blocks, clone.blocks, strict=True):
        for src, dst in zip(src_blk.trainable_variables, dst_blk.trainable_variables, strict=True):
            rows = src.numpy()
            if rows.ndim != 2:
                continue
            norms = np.linalg.norm(rows, axis=-1, keepdims=True)
            noisy = rows + rng.normal(0.0, noise, rows.shape) * norms / np.sqrt(rows.shape[-1])
            noisy *= norms / np.maximum(np.linalg.norm(noisy, axis=-1, keepdims=True), 1e-12)
            dst.assign(noisy.astype(rows.dtype))
    return clone


_DTYPES = {"string": object, "int32": np.int32, "float32": np.float32, "int64": np.int64}


def _request_tensors(prompts: list[str], max_new_tokens: int) -> dict[str, np.ndarray]:
    rows = [sig.default_row(p, max_new_tokens) for p in prompts]
    return {
        name: np.array([r[name] for r in rows], dtype=_DTYPES[kind])
        for name, kind in sig.INPUTS.items()
    }


def _continue_tensors(prompts: list[str]) -> dict[str, np.ndarray]:
    """`continue` rows resumed one token in, as a streaming request's second chunk is."""
    rows = [
        sig.continue_row(p, b" ", WARMUP_CONTINUE_CHUNK, 1 + WARMUP_CONTINUE_CHUNK) for p in prompts
    ]
    for r in rows:
        r["generated"] = b" "  # a TensorProto carries raw bytes; `b64` is REST's JSON spelling
    return {
        name: np.array([r[name] for r in rows], dtype=_DTYPES[kind])
        for name, kind in sig.CONTINUE_INPUTS.items()
    }


def _warmup_requests(prompts: list[str]) -> dict[str, dict[str, np.ndarray]]:
    """Signature name -> the inputs of one warmup request for it."""
    return {
        sig.SIGNATURE_NAME: _request_tensors(prompts, WARMUP_MAX_NEW_TOKENS),
        sig.CONTINUE_SIGNATURE_NAME: _continue_tensors(prompts),
    }


def write_warmup(path: Path, model_name: str, batch_sizes: Sequence[int]) -> int:
    """TFRecord of PredictionLog requests, one per signature and batch size; returns the count."""
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    if not batch_sizes or any(size <= 0 for size in batch_sizes):
        raise ExportError(f"warmup batch sizes must be positive, got {list(batch_sizes)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with tf.io.TFRecordWriter(str(path)) as writer:
        for size in batch_sizes:
            prompts = [CANARY_PROMPTS[i % len(CANARY_PROMPTS)] for i in range(size)]
            for signature_name, tensors in _warmup_requests(prompts).items():
                spec = model_pb2.ModelSpec(name=model_name, signature_name=signature_name)
                request = predict_pb2.PredictRequest(model_spec=spec)
                for name, value in tensors.items():
                    request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
                record = prediction_log_pb2.PredictionLog(
                    predict_log=prediction_log_pb2.PredictLog(request=request)
                )
                writer.write(record.SerializeToString())
                count += 1
    if count > sig.MAX_WARMUP_RECORDS:
        raise ExportError(f"{count} warmup records exceed TF Serving's maximum")
    return count


def golden_outputs(export_dir: Path, model_name: str, version: int) -> dict[str, object]:
    """Greedy outputs of the exported artifact itself for the fixed canary prompts."""
    fn = load_saved_model(export_dir).signatures[sig.SIGNATURE_NAME]
    tensors = _request_tensors(list(CANARY_PROMPTS), CANARY_MAX_NEW_TOKENS)
    out = fn(**{k: tf.constant(v) for k, v in tensors.items()})
    prompts = []
    for i, prompt in enumerate(CANARY_PROMPTS):
        prompts.append(
            {
                "prompt": prompt,
                "text": out["text"][i].numpy().decode("utf-8"),
                "mean_nll": round(float(out["mean_nll"][i]), 6),
                "output_tokens": int(out["output_tokens"][i]),
                "finish_reason": out["finish_reason"][i].numpy().decode(),
            }
        )
    request = {
        k: v for k, v in sig.default_row("", 0).items() if k not in ("prompt", "max_new_tokens")
    }
    return {
        "model": model_name,
        "version": version,
        "max_new_tokens": CANARY_MAX_NEW_TOKENS,
        "request": request,
        "prompts": prompts,
    }


def export_version(
    model: GPT,
    spec: BpeSpec,
    base_path: Path,
    version: int,
    *,
    model_name: str = sig.DEFAULT_MODEL_NAME,
    report: TrainReport | None = None,
    degrade_noise: float = 0.0,
    warmup_batch_sizes: Sequence[int] = DEFAULT_WARMUP_BATCH_SIZES,
) -> Path:
    """Write our trained model and its vocabulary as `base_path/<version>` (`write_version`)."""
    check_version(base_path, version)
    if degrade_noise > 0:
        model = degraded_copy(model, degrade_noise)
    meta = {
        "model": asdict(model.cfg),
        "tokenizer": {"kind": "byte-level-bpe", "merges": len(spec.merges)},
        "degrade_noise": degrade_noise,
        "train": asdict(report) if report else None,
    }
    final = write_version(
        Generator(model, bpe_vocab(spec)),
        base_path,
        version,
        model_name=model_name,
        meta=meta,
        warmup_batch_sizes=warmup_batch_sizes,
    )
    log.info("exported", path=str(final), degrade_noise=degrade_noise)
    return final


def check_version(base_path: Path, version: int) -> Path:
    """The version's directory, refused when the version is not positive or already exists."""
    if version <= 0:
        raise ExportError("version must be a positive integer")
    final = base_path / str(version)
    if final.exists():
        raise ExportError(f"{final} already exists; versions are immutable")
    return final


def write_version(
    generator: Generator,
    base_path: Path,
    version: int,
    *,
    model_name: str,
    meta: dict[str, object],
    warmup_batch_sizes: Sequence[int],
) -> Path:
    """Write `base_path/<version>` atomically (a temp dir renamed into place, as a deploy would):
    the SavedModel of both signatures, warmup records, golden canaries and `meta`."""
    final = check_version(base_path, version)
    base_path.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".export-{version}-", dir=base_path))
    os.chmod(staging, 0o755)  # mkdtemp makes it private; the server may run as another user
    # The root holds the weights and the tokenizer's tables, not the generator's tf.functions:
    # saved as methods too, each signature's graph would be written twice (an object-graph
    # copy that TF Serving never calls), doubling what every load deserializes.
    root = tf.Module(name="export")
    root.model, root.encoder = generator.model, generator.encoder
    try:
        tf.saved_model.save(
            root,
            str(staging),
            signatures={
                sig.SIGNATURE_NAME: generator.serve.get_concrete_function(),
                sig.CONTINUE_SIGNATURE_NAME: generator.continue_chunk.get_concrete_function(),
            },
        )
        records = write_warmup(staging / sig.WARMUP_FILE, model_name, warmup_batch_sizes)
        golden = golden_outputs(staging, model_name, version)
        (staging / sig.GOLDEN_FILE).write_text(json.dumps(golden, indent=2, ensure_ascii=False))
        meta = {
            **meta,
            "warmup_records": records,
            "warmup_batch_sizes": list(warmup_batch_sizes),
        }
        (staging / "assets.extra" / "tokenpulse_model.json").write_text(json.dumps(meta, indent=2))
        os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log.info("version written", path=str(final), warmup_records=records)
    return final
