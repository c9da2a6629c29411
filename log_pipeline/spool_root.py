"""A spool root: one spool directory per writer (`/spool/<pod>`), found and retired by the shipper.

Each gateway replica's sample writer owns one directory under the root and holds an exclusive
flock on its `writer.lock` while it runs (log_pipeline.sidecar). A subdirectory counts as a
writer directory once it holds a segment or that lock file, so a volume's `lost+found` or a stray
folder is never followed. A directory whose lock nobody holds has no writer: a new writer always
starts a new segment, so its segments will not grow again, and once every known output shipped
them it may be removed (renamed under a hidden name first, then deleted).
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from log_pipeline.spool import PREFIX, SUFFIX, WRITER_LOCK

TRASH_PREFIX = ".removed-"  # a retired directory on its way out (hidden: never discovered)


def _is_writer_directory(path: Path) -> bool:
    if (path / WRITER_LOCK).exists():
        return True
    return next(path.glob(f"{PREFIX}*{SUFFIX}"), None) is not None


def writer_directories(root: Path, exclude: Path | None = None) -> dict[str, Path]:
    """Subdirectory name -> path of each writer directory under `root` (hidden ones and
    `exclude`, the shipper's own state directory, skipped); leftover retired ones are deleted."""
    found: dict[str, Path] = {}
    skip = exclude.resolve() if exclude is not None else None
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except FileNotFoundError:
        return found
    for entry in entries:
        if entry.name.startswith(TRASH_PREFIX) and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)  # a removal cut short by a crash
            continue
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        if skip is not None and path.resolve() == skip:
            continue
        if _is_writer_directory(path):
            found[entry.name] = path
    return found


def _open_lock(directory: Path) -> int | None:
    """The directory's writer lock file opened for locking (read-write: NFS emulates flock with
    POSIX locks, whose exclusive kind needs a writable descriptor); None when there is none."""
    try:
        return os.open(directory / WRITER_LOCK, os.O_RDWR)
    except FileNotFoundError:
        return None


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def writer_active(directory: Path) -> bool:
    """Whether a sample writer holds the directory's lock (True when that cannot be told)."""
    try:
        fd = _open_lock(directory)
    except OSError:
        return True  # unreadable lock file: assume a writer
    if fd is None:
        return False
    try:
        return not _try_lock(fd)  # closing the descriptor releases a lock just taken
    except OSError:
        return True
    finally:
        os.close(fd)


def remove_directory(directory: Path, still_drained: Callable[[], bool]) -> bool:
    """Delete a writer directory while holding its writer lock, if `still_drained()` holds then;
    True when removed. A writer holding (or taking) the lock keeps it."""
    try:
        fd = _open_lock(directory)
    except OSError:
        return False
    trash = directory.with_name(f"{TRASH_PREFIX}{directory.name}-{time.time_ns()}")
    try:
        if fd is not None and not _try_lock(fd):
            return False
        if not still_drained():
            return False
        os.rename(directory, trash)  # atomic: discovery never sees it half deleted
    except OSError:
        return False
    finally:
        if fd is not None:
            os.close(fd)
    shutil.rmtree(trash, ignore_errors=True)
    return True
