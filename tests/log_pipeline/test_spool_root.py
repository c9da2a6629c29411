"""A spool root: which subdirectories are writer directories, who holds them, and their removal."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from log_pipeline import sidecar
from log_pipeline.spool import WRITER_LOCK
from log_pipeline.spool_root import (
    TRASH_PREFIX,
    remove_directory,
    writer_active,
    writer_directories,
)
from tests.log_pipeline.conftest import make_sample, write_samples


@contextmanager
def writer_lock(directory: Path) -> Iterator[None]:
    """Hold a directory's writer lock as the sample writer process does."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / WRITER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)


def test_the_writer_holds_the_lock_the_shipper_looks_at() -> None:
    assert sidecar.LOCK_FILE == WRITER_LOCK


def test_only_directories_with_segments_or_a_writer_lock_are_writer_directories(
    tmp_path: Path,
) -> None:
    root = tmp_path / "spool"
    write_samples(root / "gateway-a", [make_sample(0)])
    with writer_lock(root / "gateway-b"):  # a writer that has written nothing yet
        pass
    (root / "lost+found").mkdir()  # an ext4 volume's root
    (root / ".hidden").mkdir()
    (root / ".hidden" / WRITER_LOCK).touch()
    (root / "state").mkdir()  # the shipper's own state directory
    (root / "state" / WRITER_LOCK).touch()
    (root / "notes.txt").write_text("not a directory")
    leftover = root / f"{TRASH_PREFIX}gateway-z-1"  # a removal cut short
    write_samples(leftover, [make_sample(1)])
    found = writer_directories(root, exclude=root / "state")
    assert found == {"gateway-a": root / "gateway-a", "gateway-b": root / "gateway-b"}
    assert not leftover.exists()
    assert writer_directories(tmp_path / "missing") == {}


def test_a_directory_is_active_while_its_writer_holds_the_lock(tmp_path: Path) -> None:
    directory = tmp_path / "gateway-a"
    write_samples(directory, [make_sample(0)])
    assert not writer_active(directory)  # no lock file: never a writer process
    with writer_lock(directory):
        assert writer_active(directory)
    assert not writer_active(directory)  # the lock file stays, nobody holds it


def test_a_directory_is_removed_only_without_a_writer_and_when_still_drained(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "gateway-a"
    write_samples(directory, [make_sample(0)])
    with writer_lock(directory):
        assert not remove_directory(directory, lambda: True)
    assert not remove_directory(directory, lambda: False)  # new records meanwhile
    assert directory.exists()
    seen: list[bool] = []

    def drained() -> bool:  # asked while the lock is held: a new writer would wait
        seen.append(writer_active(directory))
        return True

    assert remove_directory(directory, drained)
    assert seen == [True] and not directory.exists()
    assert list(tmp_path.iterdir()) == []
