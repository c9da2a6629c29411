"""Training text: what Python ships (pydoc topics, stdlib docstrings) and our chat dialogues.

No downloads: the corpus is assembled from the interpreter's own bundled documentation, in a
fixed order, so the same Python version always yields the same bytes, and from the
customer-service dialogues of `dialogues.py` (Chinese and English, in the chat format), a
`dialogue_share` of it, shuffled in among the documents with the recipe's seed. The tokens are
our BPE's (`bpe.py`), each document followed by end-of-text.
"""

from __future__ import annotations

import ast
import random
import sysconfig
from pathlib import Path

import numpy as np

from serving.model import bpe, dialogues
from serving.model.config import TrainConfig


def _docstrings(stdlib: Path, budget: int) -> list[str]:
    """Module, class and function docstrings of the standard library, longest-lived first."""
    texts: list[str] = []
    size = 0
    for path in sorted(stdlib.glob("*.py")) + sorted(stdlib.glob("*/[!_]*.py")):
        if "test" in path.parts[-2:][0] or path.name.startswith("test"):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue  # a file this interpreter cannot parse simply contributes nothing
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef):
                doc = ast.get_docstring(node)
                if doc and len(doc) > 200:
                    texts.append(doc)
                    size += len(doc)
                    if size >= budget:
                        return texts
    return texts


def documents(max_bytes: int) -> list[str]:
    """The corpus as a list of documents, capped at about `max_bytes`."""
    from pydoc_data import topics

    docs = [topics.topics[key] for key in sorted(topics.topics)]
    size = sum(len(d) for d in docs)
    if size < max_bytes:
        docs += _docstrings(Path(sysconfig.get_paths()["stdlib"]), max_bytes - size)
    out, total = [], 0
    for doc in docs:
        if total >= max_bytes:
            break
        out.append(doc[: max_bytes - total])
        total += len(out[-1])
    return out


def corpus(cfg: TrainConfig) -> list[str]:
    """The recipe's training text: documents and dialogues, in an order fixed by its seed."""
    chat = int(cfg.corpus_bytes * cfg.dialogue_share)
    docs = documents(cfg.corpus_bytes - chat) + dialogues.dialogues(chat, cfg.seed)
    random.Random(cfg.seed).shuffle(docs)
    return docs


def token_stream(docs: list[str], spec: bpe.BpeSpec | None = None) -> np.ndarray:
    """Documents as one int32 array of `spec`'s ids, each followed by end-of-text (no spec:
    one of 1024 ids trained on `docs`)."""
    spec = spec or bpe.train(docs, 1024)
    eot = np.array([spec.special_ids[0]], np.int32)
    parts = []
    for ids in bpe.Encoder(spec).encode(docs):
        parts += [ids, eot]
    return np.concatenate(parts).astype(np.int32)


def bytes_per_token(stream: np.ndarray, spec: bpe.BpeSpec) -> float:
    """How many bytes of text a token of `stream` stands for on average."""
    lengths = np.array([len(p) for p in spec.pieces()])
    return float(lengths[stream].sum()) / max(1, len(stream))


def split(stream: np.ndarray, held_out: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Train / held-out split at a fixed point (the tail is held out)."""
    cut = int(len(stream) * (1 - held_out))
    return stream[:cut], stream[cut:]


def windows(stream: np.ndarray, length: int, batch: int, rng: np.random.Generator) -> np.ndarray:
    """A batch of random windows of `length` + 1 tokens (inputs and shifted targets)."""
    starts = rng.integers(0, len(stream) - length - 1, size=batch)
    return np.stack([stream[s : s + length + 1] for s in starts])
