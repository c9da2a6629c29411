"""`tokenpulse model import keras-hub PRESET_DIR`: a preset as a new version of our contract."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from serving.model.decoding import Decoder
from serving.model.export import check_version, write_version
from serving.model.generate import Generator
from serving.model.hub import gpt2, qwen
from serving.model.hub.preset import load_causal_lm
from serving.model.settings import ImportSettings
from serving.model.vocab import Vocab
from serving.model.warmup import choose_warmup_batch_sizes
from tokenpulse.logging import get_logger

log = get_logger(__name__)

# task class -> (family, adapter): a family is one module that turns the loaded task into our
# Decoder and Vocab (a SentencePiece family would add its vocabulary the same way)
ADAPTERS: dict[str, tuple[str, Callable[[Any], tuple[Decoder, Vocab]]]] = {
    gpt2.TASK_CLASS: (gpt2.FAMILY, gpt2.adapt),
    qwen.TASK_CLASS: (qwen.FAMILY, qwen.adapt),
}


def run_import(settings: ImportSettings) -> dict[str, object]:
    """Load the preset, export it as `BASE/<version>`; the report printed as JSON."""
    check_version(settings.base_path, settings.version)  # before the slow load
    warmup_sizes = choose_warmup_batch_sizes(
        settings.warmup_batch_sizes, settings.batching_parameters_file
    )
    causal_lm = load_causal_lm(settings.preset_dir, tuple(ADAPTERS))
    task = type(causal_lm).__name__
    family, adapt = ADAPTERS[task]
    decoder, vocab = adapt(causal_lm)
    imported: dict[str, object] = {
        "source": settings.source,
        "preset": str(settings.preset_dir),
        "task": task,
        "family": family,
        "context": decoder.cfg.context,
        "vocab_size": vocab.size,
    }
    path = write_version(
        Generator(decoder, vocab),
        settings.base_path,
        settings.version,
        model_name=settings.model_name,
        meta={"imported": imported},
        warmup_batch_sizes=warmup_sizes,
    )
    report = {"path": str(path), **imported, "warmup_batch_sizes": list(warmup_sizes)}
    log.info("imported", **report)
    return report
