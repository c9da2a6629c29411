"""Dead letters: records an output rejected for good, with the reason, in a local JSON-lines file.

Each entry is fsynced before the shipper's checkpoint moves past the record, so nothing rejected
is ever lost. The records were redacted before the spool, so the file holds no raw personal data.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from log_pipeline.outputs import Item


def deadletter_path(state_dir: Path, output: str) -> Path:
    """An output's dead-letter file."""
    return state_dir / f"deadletter-{output}.jsonl"


def _record(item: Item) -> object:
    try:
        return item.doc
    except ValueError:  # not JSON after all: keep the line as text, never lose it
        return item.raw.decode("utf-8", "replace")


class DeadLetters:
    """Appends rejected records with their reasons."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, entries: list[tuple[Item, str]]) -> None:
        """Append and fsync (one call per batch)."""
        if not entries:
            return
        now = time.time()
        lines = b"".join(
            json.dumps(
                {"dead_lettered_at": now, "id": item.id, "reason": reason, "record": _record(item)},
                ensure_ascii=False,
            ).encode()
            + b"\n"
            for item, reason in entries
        )
        with self.path.open("ab") as fh:
            fh.write(lines)
            fh.flush()
            os.fsync(fh.fileno())
