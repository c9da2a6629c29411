"""A small keras_hub GPT-2 preset and its import, built once per code revision and cached.

The preset has random weights (2 blocks, d=64) and a byte-level BPE vocabulary trained here on
the project's own training text (stdlib docstrings), with `<|endoftext|>` as the last id, as
GPT-2's is. Nothing is downloaded.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from tests.support.models import MODEL_SRC, cache_root, model_revision

VOCAB_SIZE = 400
CONTEXT = 128
CORPUS_BYTES = 60_000
EOT = "<|endoftext|>"


def _revision(*, code: bool) -> str:
    """This builder's revision; with `code`, the model code's and the importer's too."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    if code:
        digest.update(model_revision().encode())
        for path in sorted((MODEL_SRC / "hub").glob("*.py")):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _bpe(workdir: Path) -> tuple[dict[str, int], list[str]]:
    """A byte-level BPE of VOCAB_SIZE ids trained on the project's text; EOT is the last id."""
    from tokenizers import ByteLevelBPETokenizer

    from serving.model.data import documents

    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator(
        documents(CORPUS_BYTES), vocab_size=VOCAB_SIZE - 1, min_frequency=2, show_progress=False
    )
    bpe.save_model(str(workdir))
    vocab = json.loads((workdir / "vocab.json").read_text(encoding="utf-8"))
    vocab[EOT] = len(vocab)
    lines = (workdir / "merges.txt").read_text(encoding="utf-8").splitlines()
    return vocab, [m for m in lines if m and not m.startswith("#version")]


def build_gpt2_preset(target: Path, seed: int = 0) -> Path:
    """Write a small GPT-2 causal-LM preset with random weights into `target`."""
    import keras
    import keras_hub

    target.mkdir(parents=True, exist_ok=True)
    work = target.parent / f".{target.name}-bpe"
    work.mkdir(exist_ok=True)
    vocab, merges = _bpe(work)
    tokenizer = keras_hub.models.GPT2Tokenizer(vocabulary=vocab, merges=merges)
    preprocessor = keras_hub.models.GPT2CausalLMPreprocessor(
        tokenizer=tokenizer, sequence_length=CONTEXT
    )
    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=len(vocab),
        num_layers=2,
        num_heads=2,
        hidden_dim=64,
        intermediate_dim=128,
        max_sequence_length=CONTEXT,
    )
    keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=preprocessor).save_to_preset(
        str(target)
    )
    return target


def _cached(name: str, build: Callable[[Path], object], *, code: bool) -> Path:
    root = cache_root()
    target = root / "test-models" / "hub-gpt2" / _revision(code=code) / name
    ready = target / ".ready"
    if ready.exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".test-models.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test runs build it only once
        if not ready.exists():
            build(target)
            ready.touch()
    return target


def cached_gpt2_preset() -> Path:
    """The small GPT-2 preset directory (read-only: copy before changing)."""
    return _cached("preset", build_gpt2_preset, code=False)  # the preset needs no model code


def cached_gpt2_import() -> Path:
    """The preset imported as version 1 of a base path; the version directory."""
    from serving.model.hub.importer import run_import
    from serving.model.settings import ImportSettings

    preset = cached_gpt2_preset()

    def build(base: Path) -> None:
        settings = ImportSettings(
            preset_dir=preset,
            base_path=base,
            version=1,
            warmup_batch_sizes=[1, 2],
            batching_parameters_file=None,
        )
        run_import(settings)

    return _cached("import", build, code=True) / "1"
