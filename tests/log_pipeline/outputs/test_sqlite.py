"""The embedded store: insert-or-ignore by id, FTS over prompt and output, retryable errors."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from log_pipeline.outputs import Item, Outcome, RetryableError
from log_pipeline.outputs.sqlite import SqliteOutput


def _item(i: int, prompt: str = "hello", output: str = "world") -> Item:
    sample = {"model": "gen", "prompt": {"text": prompt}, "output": {"text": output},
              "sampling": {"reasons": ["head"]}}  # fmt: skip
    doc = {"@timestamp": f"2026-01-01T00:00:{i:02d}.000Z", "event": {"id": f"id-{i}"},
           "genai_sample": sample}  # fmt: skip
    return Item(f"id-{i}", doc, json.dumps(doc).encode())


def test_resends_are_duplicates_and_fts_finds_new_rows(tmp_path: Path) -> None:
    out = SqliteOutput(tmp_path / "s.db")
    first = out.send([_item(1, "refund please"), _item(2)])
    again = out.send([_item(2), _item(3, output="refund done"), _item(3, output="refund done")])
    assert [r.outcome for r in first] == [Outcome.OK, Outcome.OK]
    assert [r.outcome for r in again] == [Outcome.DUPLICATE, Outcome.OK, Outcome.DUPLICATE]
    out.close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        assert db.execute("SELECT count(*) FROM samples").fetchone()[0] == 3
        hits = db.execute(
            "SELECT s.id FROM samples s JOIN samples_fts f ON f.rowid = s.rowid "
            "WHERE samples_fts MATCH 'refund' ORDER BY s.id"
        ).fetchall()
    assert [h[0] for h in hits] == ["id-1", "id-3"]


def test_an_unusable_file_is_a_retryable_error(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(RetryableError) as info:
        SqliteOutput(path).send([_item(1)])
    assert info.value.failure == "server_error"
