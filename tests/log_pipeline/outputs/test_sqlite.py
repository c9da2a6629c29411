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


def test_words_after_a_nul_are_found(tmp_path: Path) -> None:
    out = SqliteOutput(tmp_path / "s.db")
    # a NUL in a text, and a literal backslash before "u0000" (not a NUL) in another
    out.send([_item(1, "a\x00b refund"), _item(2, output="path C:\\u0000 refund"), _item(3)])
    out.close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        hits = db.execute(
            "SELECT s.id FROM samples s JOIN samples_fts f ON f.rowid = s.rowid "
            "WHERE samples_fts MATCH 'refund' ORDER BY s.id"
        ).fetchall()
        world = db.execute("SELECT count(*) FROM samples_fts WHERE samples_fts MATCH 'world'")
        assert world.fetchone()[0] == 2  # id-1 indexed from Python, id-3 in SQL
    assert [h[0] for h in hits] == ["id-1", "id-2"]


def test_an_unusable_file_is_a_retryable_error(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(RetryableError) as info:
        SqliteOutput(path).send([_item(1)])
    assert info.value.failure == "server_error"


def test_columns_come_from_the_line_and_non_records_are_permanent(tmp_path: Path) -> None:
    good = _item(1)
    good.doc["genai_sample"].update(
        {"version": "2", "key_id": "k1", "status": 503, "quality": {"mean_nll": 4.5}}
    )
    good = Item(good.id, None, json.dumps(good.doc).encode(), good.timestamp)
    broken = Item("id-2", None, b'{"@timestamp":"2026-01-01T00:00:02.000Z", cut', "t")
    binary = Item("id-3", None, b'{"a":"\xff"}', "t")
    listed = Item("id-4", None, b"[1, 2]", "t")
    out = SqliteOutput(tmp_path / "s.db")
    results = out.send([broken, good, binary, listed])
    assert [r.outcome for r in results] == [Outcome.PERMANENT, Outcome.OK] + [Outcome.PERMANENT] * 2
    assert out.send([good])[0].outcome is Outcome.DUPLICATE
    out.close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        row = db.execute(
            "SELECT id, ts, model, version, finish_reason, mean_nll, reasons, key_id, status "
            "FROM samples"
        ).fetchall()
    assert row == [("id-1", "2026-01-01T00:00:01.000Z", "gen", "2", "", 4.5, "|head|", "k1", 503)]
