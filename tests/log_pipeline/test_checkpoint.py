"""Checkpoints: saved atomically, read back, and unreadable ones reported, not trusted."""

from __future__ import annotations

from pathlib import Path

import pytest

from log_pipeline.checkpoint import (
    CheckpointError,
    Position,
    checkpoint_path,
    load_checkpoint,
    save_checkpoint,
)


def test_round_trip_and_no_temporary_left(tmp_path: Path) -> None:
    path = checkpoint_path(tmp_path / "state", "sqlite")
    assert load_checkpoint(path) is None
    save_checkpoint(path, Position(3, 120))
    save_checkpoint(path, Position(4, 0))
    assert load_checkpoint(path) == Position(4, 0)
    assert [p.name for p in path.parent.iterdir()] == [path.name]


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"seq": 1}', b'{"seq": -1, "offset": 0}'])
def test_unreadable(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "checkpoint-x.json"
    path.write_bytes(content)
    with pytest.raises(CheckpointError):
        load_checkpoint(path)


def test_positions_order_by_segment_then_offset() -> None:
    assert Position(1, 900) < Position(2, 0) < Position(2, 5)
