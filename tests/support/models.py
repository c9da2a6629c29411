"""Exported test models: built once per model-code revision and shared across test runs."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from stack.drill.canary import DEGRADE_NOISE
from tokenpulse.paths import ROOT

MODEL_SRC = ROOT / "serving" / "model"
CHAT_FORMAT = ROOT / "tokenpulse" / "chatformat.py"


def model_revision() -> str:
    """Hash of the model package's sources and training data, and of the chat format it trains
    on: a change rebuilds the cached test exports."""
    digest = hashlib.sha256()
    sources = [*MODEL_SRC.glob("*.py"), *MODEL_SRC.glob("*.yaml"), CHAT_FORMAT]
    for path in sorted(sources):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def cache_root() -> Path:
    """Where the shared test exports live (override with TOKENPULSE_TEST_CACHE)."""
    return Path(os.environ.get("TOKENPULSE_TEST_CACHE", ROOT / ".cache" / "tokenpulse"))


def cached_export(kind: str) -> Path:
    """Path of the `tiny` export of the given kind ('normal' or 'degraded'), building it once."""
    from serving.model.build import run_build
    from serving.model.settings import BuildSettings

    root = cache_root()
    # the degraded export is the drill's degraded version (its noise); a new noise rebuilds
    folder = f"{kind}-{DEGRADE_NOISE:g}" if kind == "degraded" else kind
    target_base = root / "test-models" / model_revision() / folder
    ready = target_base / "1" / "saved_model.pb"
    if ready.exists():
        return target_base / "1"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".test-models.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test runs build it only once
        if not ready.exists():
            noise = DEGRADE_NOISE if kind == "degraded" else 0.0
            run_build(
                BuildSettings(
                    preset="tiny",
                    base_path=target_base,
                    version=1,
                    degrade_noise=noise,
                    cache_dir=root,
                    progress=False,
                )
            )
    return target_base / "1"


def tiny_tokens(text: str) -> int:
    """How many tokens the tiny export's vocabulary makes of `text`, by the training encoder
    (its vocabulary read from the checkpoint the export was built from)."""
    cached_export("normal")
    from serving.model.bpe import Encoder
    from serving.model.config import get_preset
    from serving.model.tokenizer import read_spec
    from serving.model.train import checkpoint_dir

    spec = read_spec(str(checkpoint_dir(cache_root(), get_preset("tiny")) / "weights"))
    if spec is None:
        raise RuntimeError("the tiny checkpoint carries no vocabulary")
    return len(Encoder(spec).encode([text])[0])


def install_version(export_dir: Path, base_path: Path, version: int) -> Path:
    """Deploy an export as `base_path/<version>` atomically: copy aside, then rename into place."""
    base_path.mkdir(parents=True, exist_ok=True)
    final = base_path / str(version)
    staging = Path(tempfile.mkdtemp(prefix=f".deploy-{version}-", dir=base_path))
    shutil.copytree(export_dir, staging, dirs_exist_ok=True)
    os.chmod(staging, 0o755)
    os.replace(staging, final)
    return final


def lifecycle_export(path: Path) -> Path:
    """A version for tests of loading, versions and warmup, not of generation: `contract_model`
    (the whole contract, trivial answers) with the warmup records an export writes (one per
    signature and batch size, 1 to 32). It loads and warms up in a fraction of a second, where
    the tiny export costs about 7 CPU-s (2.5 to load, 2 for each signature's first run)."""
    from serving.model.export import write_warmup
    from serving.model.warmup import DEFAULT_WARMUP_BATCH_SIZES
    from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME, WARMUP_FILE

    contract_model(path)
    write_warmup(path / WARMUP_FILE, DEFAULT_MODEL_NAME, DEFAULT_WARMUP_BATCH_SIZES)
    return path


def contract_model(
    path: Path,
    *,
    signatures: tuple[str, ...] = ("serving_default", "continue"),
    drop: tuple[str, ...] = (),
    dtypes: dict[str, str] | None = None,
    py_function: bool = False,
    continue_tokens: int = 0,
    answers: dict[str, object] | None = None,
    keras_weight: bool = False,
) -> Path:
    """A SavedModel with the contract's signatures and trivial answers (empty text, 0 tokens),
    saved in well under a second: leave out tensors (`drop`, "signature.name" or a name in
    every signature), change dtypes (`dtypes`, same keys), run `text` through tf.py_function, or
    have `continue` stream `continue_tokens` bytes the unary text lacks; `answers` sets an
    output of `serving_default` to a value of its own; `keras_weight` adds a Keras 3 weight
    (0.0) to `mean_nll`, tracked as it is, which a TF1 session cannot restore."""
    import tensorflow as tf

    from tokenpulse.tfserving import signature as sig

    tables = {
        sig.SIGNATURE_NAME: (sig.INPUTS, sig.OUTPUTS),
        sig.CONTINUE_SIGNATURE_NAME: (sig.CONTINUE_INPUTS, sig.CONTINUE_OUTPUTS),
    }

    def keep(signature: str, name: str) -> bool:
        return name not in drop and f"{signature}.{name}" not in drop

    def dtype(signature: str, name: str, default: str) -> tf.DType:
        given = dtypes or {}
        return tf.as_dtype(given.get(f"{signature}.{name}", given.get(name, default)))

    def answer(signature: str, outputs: dict[str, str]) -> Any:
        def fn(**inputs: tf.Tensor) -> dict[str, tf.Tensor]:
            batch = tf.shape(inputs["prompt"])[:1]
            out = {}
            for name, kind in outputs.items():
                if not keep(signature, name):
                    continue
                if signature == sig.SIGNATURE_NAME and name in (answers or {}):
                    value = tf.constant((answers or {})[name], dtype(signature, name, kind))
                    out[name] = tf.fill(batch, value)
                    continue
                if name == "tokens":
                    shape = tf.concat([batch, [max(continue_tokens, 1)]], 0)
                    out[name] = tf.fill(shape, tf.constant(ord("a"), dtype(signature, name, kind)))
                elif name == "n_tokens":
                    out[name] = tf.fill(batch, tf.constant(continue_tokens, tf.int32))
                elif kind == "string":
                    value = sig.FINISH_STOP if name == "finish_reason" else ""
                    out[name] = tf.fill(batch, value)
                else:
                    out[name] = tf.zeros(batch, dtype(signature, name, kind))
            if weight is not None and "mean_nll" in out:
                out["mean_nll"] += weight.value
            if py_function and "text" in out:
                out["text"] = tf.py_function(lambda t: t, [out["text"]], tf.string)
            return out

        return fn

    module, weight = tf.Module(), None
    if keras_weight:
        import keras

        module.weight = weight = keras.Variable(0.0, name="weight")
    concrete = {}
    for signature in signatures:
        inputs, outputs = tables[signature]
        specs = {
            name: tf.TensorSpec(
                [None, None] if name == "stop" else [None], dtype(signature, name, kind), name
            )
            for name, kind in inputs.items()
            if keep(signature, name)
        }
        fn = tf.function(answer(signature, outputs))
        setattr(module, signature, fn)
        concrete[signature] = fn.get_concrete_function(**specs)
    tf.saved_model.save(module, str(path), signatures=concrete)
    return path
