"""Dead letters: records an output rejected for good, with the reason, in local JSON-lines files.

Each entry is fsynced before the shipper's checkpoint moves past the record, so nothing rejected
is ever lost. The records were redacted before the spool, so the files hold no raw personal data.
An output's current file is `deadletter-<output>.jsonl`; at `segment_bytes` it is renamed to
`deadletter-<output>-<n>.jsonl` and a new one begins. The files live in the state directory
(by default `<spool>/state`), where the sink's writer counts them toward the spool's disk cap.
`tokenpulse samples replay` sends them back to their output (log_pipeline.replay). Writers and
the replay serialise on `deadletter-<output>.lock` (flock), files are created 0600.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from log_pipeline.outputs import Item

PATTERN = "deadletter-*.jsonl"  # every output's files (the spool's cap counts them)


def deadletter_path(state_dir: Path, output: str) -> Path:
    """An output's current dead-letter file."""
    return state_dir / f"deadletter-{output}.jsonl"


def _rotated_number(path: Path, output: str) -> int | None:
    found = re.fullmatch(rf"deadletter-{re.escape(output)}-(\d+)\.jsonl", path.name)
    return int(found.group(1)) if found else None


def rotated_files(state_dir: Path, output: str) -> list[Path]:
    """An output's rotated (closed) dead-letter files, oldest first."""
    numbered = [(n, p) for p in state_dir.glob(f"deadletter-{output}-*.jsonl")
                if (n := _rotated_number(p, output)) is not None]  # fmt: skip
    return [p for _, p in sorted(numbered)]


def deadletter_files(state_dir: Path, output: str) -> list[Path]:
    """Every dead-letter file of an output, oldest first (the current one last)."""
    current = deadletter_path(state_dir, output)
    return rotated_files(state_dir, output) + ([current] if current.exists() else [])


def read_entries(path: Path) -> list[dict[str, Any]]:
    """The entries of one dead-letter file (a line torn by a crash is skipped)."""
    out = []
    for line in path.read_bytes().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and "id" in entry:
            out.append(entry)
    return out


@contextlib.contextmanager
def locked(state_dir: Path, output: str) -> Iterator[None]:
    """The output's dead-letter lock, held for the block."""
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(state_dir / f"deadletter-{output}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def rotate(state_dir: Path, output: str) -> Path | None:
    """Close the current file under the next number (call with the lock held); the new name."""
    current = deadletter_path(state_dir, output)
    if not current.exists() or current.stat().st_size == 0:
        return None
    numbers = [_rotated_number(p, output) or 0 for p in rotated_files(state_dir, output)]
    target = state_dir / f"deadletter-{output}-{max(numbers, default=0) + 1:06d}.jsonl"
    os.replace(current, target)
    return target


def _record(item: Item) -> object:
    try:
        return item.doc
    except ValueError:  # not JSON after all: keep the line as text, never lose it
        return item.raw.decode("utf-8", "replace")


def encode(entries: list[tuple[Item, str]], now: float | None = None) -> bytes:
    """Dead-letter lines for these items and reasons."""
    at = time.time() if now is None else now
    return b"".join(
        json.dumps(
            {"dead_lettered_at": at, "id": item.id, "reason": reason, "record": _record(item)},
            ensure_ascii=False,
        ).encode()
        + b"\n"
        for item, reason in entries
    )


def append(path: Path, data: bytes) -> None:
    """Append and fsync, creating the file private."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


class DeadLetters:
    """Appends rejected records with their reasons, rotating at `segment_bytes`."""

    def __init__(self, state_dir: Path, output: str, segment_bytes: int = 16 << 20) -> None:
        self.state_dir = state_dir
        self.output = output
        self.segment_bytes = segment_bytes
        self.path = deadletter_path(state_dir, output)
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)

    def write(self, entries: list[tuple[Item, str]]) -> None:
        """Append and fsync (one call per batch), rotating first when the file is full."""
        if not entries:
            return
        data = encode(entries)
        with locked(self.state_dir, self.output):
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            if size and size + len(data) > self.segment_bytes:
                rotate(self.state_dir, self.output)
            append(self.path, data)
