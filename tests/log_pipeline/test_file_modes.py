"""Prompts and outputs stay private on disk: the spool, the embedded store, checkpoints and dead
letters are created 0700 (directories) / 0600 (files), whatever the umask lets through."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from log_pipeline.checkpoint import Position, save_checkpoint
from log_pipeline.deadletter import DeadLetters
from log_pipeline.outputs import Item
from log_pipeline.outputs.sqlite import SqliteOutput
from log_pipeline.sidecar import _lock
from log_pipeline.spool import list_segments
from tests.log_pipeline.conftest import make_sample, write_samples


@pytest.fixture(autouse=True)
def _usual_umask() -> Iterator[None]:
    old = os.umask(0o022)  # a usual shell's: 0644 files and 0755 directories by default
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_everything_the_pipeline_writes_is_private(tmp_path: Path) -> None:
    run = tmp_path / "run"
    spool = run / "spool"
    write_samples(spool, [make_sample(i) for i in range(3)])
    os.close(_lock(spool))
    raw = b'{"@timestamp":"2026-01-01T00:00:00.000Z","event":{"id":"a"}}'
    db = run / "samples.db"
    out = SqliteOutput(db)
    out.send([Item("a", None, raw, "2026-01-01T00:00:00.000Z")])
    state = spool / "state"
    save_checkpoint(state / "checkpoint-sqlite.json", Position(1, 0))
    DeadLetters(state, "elasticsearch").write([(Item("b", None, raw), "rejected")])
    files = [*list_segments(spool), spool / "writer.lock", state / "checkpoint-sqlite.json",
             state / "deadletter-elasticsearch.jsonl", db, *run.glob("samples.db-*")]  # fmt: skip
    assert len(files) >= 7
    modes = {str(p.relative_to(run)): oct(_mode(p)) for p in files}
    assert set(modes.values()) == {"0o600"}, modes
    for d in (spool, state):
        assert _mode(d) == 0o700, d
    out.close()
