"""Importable entry points behind `tokenpulse model build|train|export|generate`."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from serving.model import targets
from serving.model.settings import BuildSettings, ExportSettings, GenerateSettings, TrainSettings
from tokenpulse.tfserving import signature as sig
from tokenpulse.tfserving.ops import load_saved_model


def run_build(settings: BuildSettings) -> dict[str, object]:
    """Train (reusing the cached checkpoint of the same recipe) and export one version."""
    target = settings.base_path / str(settings.version)
    if target.exists() and settings.keep_existing:  # before TensorFlow's import: a rerun is quick
        return {"path": str(target), "kept": True}
    from serving.model.config import get_preset
    from serving.model.export import export_version
    from serving.model.train import train
    from serving.model.transformer import GPT
    from serving.model.warmup import choose_warmup_batch_sizes

    warmup_sizes = choose_warmup_batch_sizes(
        settings.warmup_batch_sizes, settings.batching_parameters_file
    )
    preset = get_preset(settings.preset)
    if target.exists():
        if not settings.overwrite:
            raise FileExistsError(f"{target} already exists (use --overwrite to replace it)")
        shutil.rmtree(target)
    model = GPT(preset.model, seed=preset.train.seed)
    report, spec = train(model, preset, settings.cache_dir, progress=settings.progress)
    path = export_version(
        model,
        spec,
        settings.base_path,
        settings.version,
        model_name=settings.model_name,
        report=report,
        degrade_noise=settings.degrade_noise,
        warmup_batch_sizes=warmup_sizes,
    )
    return {"path": str(path), "degrade_noise": settings.degrade_noise, **asdict(report)}


def run_train(
    settings: TrainSettings, say: Callable[[str], None] | None = None
) -> dict[str, object]:
    """Train with checkpoints: in this process (one worker, or `--strategy mirrored`), or over
    `--workers` processes that a supervisor restarts from the newest checkpoint; the report.
    `say` gets the supervisor's event lines (default: stderr). With `--metrics-port` the
    workers are registered for Prometheus until the run ends on purpose (targets.py). A worker of
    a cluster started elsewhere (--worker-hosts, --tf-config) trains its part in this process,
    scraped where it runs (a PodMonitor), not registered here."""
    if settings.worker_hosts or settings.tf_config:
        from serving.model.worker import join

        return join(settings)
    if not settings.metrics_port:
        return _train(settings, say)
    run_dir, folder = settings.run_path(), settings.targets_path()
    host, port = settings.metrics_host, settings.metrics_port
    targets.register(folder, run_dir, host, port, settings.workers)
    try:
        report = _train(settings, say)
    except KeyboardInterrupt:
        targets.unregister(folder, run_dir)
        raise
    targets.unregister(folder, run_dir)
    return report


def _train(settings: TrainSettings, say: Callable[[str], None] | None) -> dict[str, object]:
    if settings.workers == 1:
        from serving.model.loop import train_process
        from serving.model.metrics import TrainingMetrics

        metrics = TrainingMetrics()
        if settings.metrics_port:
            metrics.serve(settings.metrics_port, settings.metrics_host)
        return dict(train_process(settings, metrics=metrics) or {})
    from serving.model.loop import report_of
    from serving.model.supervisor import supervise

    restarts = supervise(settings, say)
    return {**report_of(settings.run_path()), "restarts": restarts}


def run_export(settings: ExportSettings) -> dict[str, object]:
    """Export one training checkpoint (a prefix, a directory's newest, or `latest`) as a new
    version; `tokenpulse rollout` takes it from there."""
    from serving.model import checkpoints
    from serving.model.config import get_preset
    from serving.model.export import export_version
    from serving.model.tokenizer import read_spec
    from serving.model.transformer import GPT
    from serving.model.warmup import choose_warmup_batch_sizes

    warmup_sizes = choose_warmup_batch_sizes(
        settings.warmup_batch_sizes, settings.batching_parameters_file
    )
    prefix = checkpoints.resolve(settings.checkpoint, settings.run_path())
    state = checkpoints.read_state(prefix)
    try:
        preset = get_preset(str(state["preset"]))
    except ValueError as exc:
        raise checkpoints.CheckpointError(f"{prefix}: {exc}") from exc
    model = GPT(preset.model)
    checkpoints.load_weights(model, prefix)
    spec = read_spec(prefix)
    if spec is None:
        raise checkpoints.CheckpointError(f"{prefix} carries no vocabulary (a byte-level run)")
    path = export_version(
        model,
        spec,
        settings.base_path,
        settings.version,
        model_name=settings.model_name,
        warmup_batch_sizes=warmup_sizes,
    )
    return {"path": str(path), "checkpoint": prefix, **state}


def latest_version(base_path: Path) -> int:
    """Highest numeric version directory under a base path."""
    versions = [int(p.name) for p in base_path.iterdir() if p.is_dir() and p.name.isdigit()]
    if not versions:
        raise FileNotFoundError(f"no version directories under {base_path}")
    return max(versions)


def run_generate(settings: GenerateSettings) -> dict[str, object]:
    """Load one version's SavedModel and run its signature on one prompt (a missing base path or
    version is refused before TensorFlow is imported)."""
    if not settings.base_path.is_dir():
        what = "is not a directory" if settings.base_path.exists() else "does not exist"
        raise FileNotFoundError(f"model base path {settings.base_path} {what}")
    version = settings.version or latest_version(settings.base_path)
    if not (settings.base_path / str(version) / "saved_model.pb").is_file():
        raise FileNotFoundError(f"no SavedModel of version {version} under {settings.base_path}")
    import tensorflow as tf

    fn = load_saved_model(settings.base_path / str(version)).signatures[sig.SIGNATURE_NAME]
    inputs = {
        "prompt": tf.constant([settings.prompt]),
        "max_new_tokens": tf.constant([settings.max_new_tokens], tf.int32),
        "temperature": tf.constant([settings.temperature], tf.float32),
        "top_k": tf.constant([settings.top_k], tf.int32),
        "top_p": tf.constant([settings.top_p], tf.float32),
        "seed": tf.constant([settings.seed], tf.int64),
        "stop": tf.constant([sig.stop_slots(settings.stop)]),
        "ignore_eos": tf.constant([int(settings.ignore_eos)], tf.int32),
    }
    _, takes = fn.structured_input_signature
    if (settings.stop or settings.ignore_eos) and "stop" not in takes:
        raise ValueError(f"version {version} was exported before stop and ignore_eos existed")
    out = fn(**{k: v for k, v in inputs.items() if k in takes})  # older exports: no stop input
    row = {k: v.numpy()[0] for k, v in out.items()}
    return {
        "text": row["text"].decode("utf-8"),
        "version": version,
        "prompt_tokens": int(row["prompt_tokens"]),
        "truncated_prompt_tokens": int(row["truncated_prompt_tokens"]),
        "output_tokens": int(row["output_tokens"]),
        "finish_reason": row["finish_reason"].decode(),
        "mean_nll": round(float(row["mean_nll"]), 4),
        **({"stop_index": int(row["stop_index"])} if "stop_index" in row else {}),
    }
