"""Per-output checkpoints: the spool position up to which an output has acknowledged everything.

Written atomically (temporary file, fsync, rename, fsync of the directory), so a crash leaves the
old checkpoint or the new one, never a mix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tokenpulse.atomic import atomic_write


class CheckpointError(Exception):
    """A checkpoint file exists but cannot be read."""


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """Segment number and byte offset in it."""

    seq: int
    offset: int


def checkpoint_path(state_dir: Path, output: str) -> Path:
    """Where an output's checkpoint lives."""
    return state_dir / f"checkpoint-{output}.json"


def load_checkpoint(path: Path) -> Position | None:
    """The saved position, None when there is none yet; CheckpointError when unreadable."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        data = json.loads(raw)
        pos = Position(int(data["seq"]), int(data["offset"]))
    except (ValueError, TypeError, KeyError) as exc:
        raise CheckpointError(f"{path} is not a checkpoint: {exc!r}") from exc
    if pos.seq < 0 or pos.offset < 0:
        raise CheckpointError(f"{path} holds a negative position")
    return pos


def save_checkpoint(path: Path, pos: Position) -> None:
    """Replace the checkpoint atomically and durably."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(path, json.dumps({"seq": pos.seq, "offset": pos.offset}), 0o600, durable=True)
