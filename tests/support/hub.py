"""Small keras_hub presets (GPT-2, Qwen) and their imports, built once per code revision and cached.

Each preset has random weights (2 blocks, d=64) and a byte-level BPE vocabulary trained here on
the project's own training text (stdlib docstrings), with `<|endoftext|>` as the last id, as
GPT-2's is (Qwen's tokenizer reads the same vocabulary and merges). Nothing is downloaded.
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


def _bpe_in(target: Path) -> tuple[dict[str, int], list[str]]:
    """`_bpe` trained in a work directory beside `target` (created)."""
    target.mkdir(parents=True, exist_ok=True)
    work = target.parent / f".{target.name}-bpe"
    work.mkdir(exist_ok=True)
    return _bpe(work)


def _build(target: Path, family: str, seed: int, std: float | None, **backbone: object) -> Path:
    """Write keras_hub's `<family>CausalLM` (2 blocks, d=64) with random weights into `target`:
    keras_hub's initialisers, or every weight but the norms' scales drawn at `std`."""
    import keras
    import keras_hub
    import numpy as np

    vocab, merges = _bpe_in(target)
    models = keras_hub.models
    tokenizer = getattr(models, f"{family}Tokenizer")(vocabulary=vocab, merges=merges)
    preprocessor = getattr(models, f"{family}CausalLMPreprocessor")(
        tokenizer=tokenizer, sequence_length=CONTEXT
    )
    keras.utils.set_random_seed(seed)
    model = getattr(models, f"{family}Backbone")(
        vocabulary_size=len(vocab), num_layers=2, hidden_dim=64, intermediate_dim=128, **backbone
    )
    if std is not None:
        rng = np.random.default_rng(seed)
        for weight in model.weights:
            if not weight.path.endswith("scale"):
                weight.assign(rng.normal(0.0, std, weight.shape).astype("float32"))
    causal_lm = getattr(models, f"{family}CausalLM")(backbone=model, preprocessor=preprocessor)
    causal_lm.save_to_preset(str(target))
    return target


def build_gpt2_preset(target: Path, seed: int = 0) -> Path:
    """Write a small GPT-2 causal-LM preset with random weights into `target`."""
    return _build(target, "GPT2", seed, None, num_heads=2, max_sequence_length=CONTEXT)


def build_qwen_preset(target: Path, seed: int = 0) -> Path:
    """Write a small Qwen causal-LM preset with random weights (GQA: 4 query heads, 2 key/value
    heads) into `target`.

    keras_hub's initialisers (embeddings at std 0.01) leave the tied output dominated by the
    last token's own embedding, so greedy repeats it: wider weights (std 0.3) write varied
    text, which a token-for-token comparison needs to mean anything.
    """
    return _build(target, "Qwen", seed, 0.3, num_query_heads=4, num_key_value_heads=2)


def _cached(family: str, name: str, build: Callable[[Path], object], *, code: bool) -> Path:
    root = cache_root()
    target = root / "test-models" / f"hub-{family}" / _revision(code=code) / name
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


def _import(family: str, preset: Path) -> Path:
    """`preset` imported as version 1 of a base path, cached; the version directory."""
    from serving.model.hub.importer import run_import
    from serving.model.settings import ImportSettings

    def build(base: Path) -> None:
        settings = ImportSettings(
            preset_dir=preset,
            base_path=base,
            version=1,
            warmup_batch_sizes=[1, 2],
            batching_parameters_file=None,
        )
        run_import(settings)

    return _cached(family, "import", build, code=True) / "1"


def cached_gpt2_preset() -> Path:
    """The small GPT-2 preset directory (read-only: copy before changing)."""
    return _cached("gpt2", "preset", build_gpt2_preset, code=False)  # needs no model code


def cached_gpt2_import() -> Path:
    """The GPT-2 preset imported as version 1 of a base path; the version directory."""
    return _import("gpt2", cached_gpt2_preset())


def cached_qwen_preset() -> Path:
    """The small Qwen preset directory (read-only: copy before changing)."""
    return _cached("qwen", "preset", build_qwen_preset, code=False)


def cached_qwen_import() -> Path:
    """The Qwen preset imported as version 1 of a base path; the version directory."""
    return _import("qwen", cached_qwen_preset())
