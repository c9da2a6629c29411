"""atomic_write: readers see the old file or the new one, in the mode asked for, and no litter."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenpulse.atomic import atomic_write


@pytest.fixture
def umask() -> Iterator[None]:
    """A known umask for the test, the process's own restored after."""
    old = os.umask(0o027)
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_text_is_written_as_utf8_and_bytes_as_they_are(tmp_path: Path) -> None:
    path = tmp_path / "labels.config"
    atomic_write(path, "版本 stable\n")
    assert path.read_bytes() == "版本 stable\n".encode()
    atomic_write(path, b"\x00\xff")
    assert path.read_bytes() == b"\x00\xff"


def test_a_mode_is_exact_whatever_the_umask(tmp_path: Path, umask: None) -> None:
    keys, weight = tmp_path / "keys.json", tmp_path / "canary-weight.json"
    atomic_write(keys, "{}", mode=0o600)
    atomic_write(weight, "{}", mode=0o644)  # wider than the umask allows
    assert (_mode(keys), _mode(weight)) == (0o600, 0o644)


def test_without_a_mode_a_replaced_file_keeps_its_own_and_a_new_one_gets_opens(
    tmp_path: Path, umask: None
) -> None:
    kept = tmp_path / "models.config"
    kept.write_text("old")
    kept.chmod(0o604)
    atomic_write(kept, "new")
    new = tmp_path / "faults.json"
    atomic_write(new, "{}")
    assert (_mode(kept), kept.read_text(), _mode(new)) == (0o604, "new", 0o640)


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    target = tmp_path / "state"
    target.mkdir()  # a directory: the rename fails
    (target / "inside").write_text("kept")
    with pytest.raises(OSError):
        atomic_write(target, "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]
    assert (target / "inside").read_text() == "kept"


def test_a_reader_polling_the_file_never_sees_half_of_it(tmp_path: Path) -> None:
    path = tmp_path / "faults.json"
    contents = [b"a" * 1_000_000, b"b" * 1_500_000]
    atomic_write(path, contents[0])
    seen: set[bytes] = set()
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.add(path.read_bytes())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(60):
            atomic_write(path, contents[i % 2])
    finally:
        done.set()
        reader.join()
    assert seen <= set(contents) and seen, {len(s) for s in seen}
    assert [p.name for p in tmp_path.iterdir()] == ["faults.json"]


def test_durable_flushes_the_file_and_then_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    atomic_write(tmp_path / "checkpoint.json", "{}", durable=True)
    assert synced == ["file", "dir"]
    synced.clear()
    atomic_write(tmp_path / "checkpoint.json", "{}")
    assert synced == []
