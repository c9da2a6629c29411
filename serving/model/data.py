"""Training text the project makes from what Python ships: pydoc topics and stdlib docstrings.

No downloads: the corpus is assembled from the interpreter's own bundled documentation, in a
fixed order, so the same Python version always yields the same bytes.
"""

from __future__ import annotations

import ast
import sysconfig
from pathlib import Path

import numpy as np

from serving.model.config import EOT_ID


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


def token_stream(docs: list[str]) -> np.ndarray:
    """Documents as one uint16 array of byte ids, each followed by the end-of-text id."""
    parts = []
    for doc in docs:
        parts.append(np.frombuffer(doc.encode("utf-8", errors="replace"), dtype=np.uint8))
        parts.append(np.array([EOT_ID]))
    return np.concatenate(parts).astype(np.int32)


def split(stream: np.ndarray, held_out: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Train / held-out split at a fixed point (the tail is held out)."""
    cut = int(len(stream) * (1 - held_out))
    return stream[:cut], stream[cut:]


def windows(stream: np.ndarray, length: int, batch: int, rng: np.random.Generator) -> np.ndarray:
    """A batch of random windows of `length` + 1 tokens (inputs and shifted targets)."""
    starts = rng.integers(0, len(stream) - length - 1, size=batch)
    return np.stack([stream[s : s + length + 1] for s in starts])
