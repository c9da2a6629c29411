"""Write-then-rename: replace a file so that a reader sees the old content or the new, never half.

Components poll files that others rewrite while they run (model labels, the canary weight, the
gateway's keys, the exporter's fault file, the shipper's checkpoints); every such write goes
through `atomic_write`.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path


def atomic_write(
    path: Path, data: str | bytes, mode: int | None = None, *, durable: bool = False
) -> None:
    """Replace `path` with `data` (a str is written as UTF-8) in one rename.

    `mode` is the new file's permission bits, whatever the umask; None keeps the replaced file's,
    or gives a new file what `open()` would (0o666 less the umask). `durable` also flushes the
    file and its directory to disk, so the new content survives a power cut, not only a crash.
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    keep = None
    if mode is None:
        with contextlib.suppress(FileNotFoundError):
            keep = path.stat().st_mode & 0o777
    final = mode if mode is not None else keep
    # a secret is never readable by others, not even in the temporary file
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if final is not None else 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            if final is not None:
                os.fchmod(f.fileno(), final)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    if durable:
        fsync_directory(path.parent)


def fsync_directory(directory: Path) -> None:
    """Make what was created, renamed or removed in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
