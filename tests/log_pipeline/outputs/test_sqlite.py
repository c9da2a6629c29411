"""The embedded store: insert-or-ignore by id, FTS over the analyzed prompt and output, migration
of the first layout, retryable errors."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from log_pipeline.outputs import Item, Outcome, RetryableError
from log_pipeline.outputs.sqlite import SCHEMA_VERSION, SqliteOutput, connect
from log_pipeline.search import Filters, SqliteStore


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
            "SELECT s.id FROM samples s JOIN samples_terms f ON f.rowid = s.rowid "
            "WHERE samples_terms MATCH 'refund' ORDER BY s.id"
        ).fetchall()
    assert [h[0] for h in hits] == ["id-1", "id-3"]


def test_words_after_a_nul_are_found(tmp_path: Path) -> None:
    out = SqliteOutput(tmp_path / "s.db")
    # a NUL in a text, and a literal backslash before "u0000" (not a NUL) in another
    out.send([_item(1, "a\x00b refund"), _item(2, output="path C:\\u0000 refund"), _item(3)])
    out.close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        hits = db.execute(
            "SELECT s.id FROM samples s JOIN samples_terms f ON f.rowid = s.rowid "
            "WHERE samples_terms MATCH 'refund' ORDER BY s.id"
        ).fetchall()
        world = db.execute("SELECT count(*) FROM samples_terms WHERE samples_terms MATCH 'world'")
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


def _found(path: Path, text: str) -> list[str]:
    return sorted(r["event"]["id"] for r in SqliteStore(path).search(Filters(text=text, limit=99)))


def test_chinese_words_of_one_two_and_three_characters(tmp_path: Path) -> None:
    out = SqliteOutput(tmp_path / "s.db")
    out.send([_item(1, "我要申请退款"), _item(2, output="您的iPhone退款已处理"), _item(3, "退了款"),
              _item(4, "Refund for my iPhone"), _item(5, "ｶｰﾄﾞ カード")])  # fmt: skip
    out.close()
    db = tmp_path / "s.db"
    assert _found(db, "退款") == ["id-1", "id-2"]
    assert _found(db, "退") == ["id-1", "id-2", "id-3"]
    assert _found(db, "申请退款") == _found(db, "请退款") == ["id-1"]
    assert _found(db, "iPhone退款") == ["id-2"]
    assert _found(db, "IPHONE") == ["id-2", "id-4"]
    assert _found(db, "refund iphone") == ["id-4"]
    assert _found(db, "カード") == ["id-5"]
    assert _found(db, "款退") == []


FIRST_LAYOUT = """
CREATE TABLE samples (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, ts TEXT NOT NULL,
    model TEXT NOT NULL DEFAULT '', version TEXT NOT NULL DEFAULT '',
    finish_reason TEXT NOT NULL DEFAULT '', mean_nll REAL, reasons TEXT NOT NULL DEFAULT '',
    key_id TEXT NOT NULL DEFAULT '', status INTEGER NOT NULL DEFAULT 0, doc TEXT NOT NULL);
CREATE INDEX samples_ts ON samples (ts);
CREATE VIRTUAL TABLE samples_fts USING fts5(prompt, output, content='');
"""


def test_a_store_of_the_first_layout_is_migrated_and_reindexed(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as old:
        old.executescript(FIRST_LAYOUT)
        for i, text in enumerate(["我要申请退款", "refund please", "a\x00b 申请退款"], 1):
            item = _item(i, text)
            item.doc["genai_sample"].update({"request_id": f"req-{i}", "version_label": "canary"})
            old.execute("INSERT INTO samples (id, ts, model, doc) VALUES (?, ?, 'gen', ?)",
                        (item.id, item.timestamp, json.dumps(item.doc)))  # fmt: skip
            old.execute("INSERT INTO samples_fts (rowid, prompt, output) VALUES (?, ?, ?)",
                        (i, text, "world"))  # fmt: skip
        assert old.execute("SELECT count(*) FROM samples_fts WHERE samples_fts MATCH '退款'"
                           ).fetchone()[0] == 0  # the first layout's blind spot  # fmt: skip
    assert _found(path, "退款") == ["id-1", "id-3"]  # opening for a search migrates
    conn = connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "samples_fts" not in tables and "samples_terms" in tables
    assert conn.execute("SELECT request_id, label FROM samples WHERE id = 'id-2'").fetchone() == (
        "req-2", "canary")  # fmt: skip
    conn.close()
    out = SqliteOutput(path)  # the shipper goes on writing into the migrated store
    assert out.send([_item(4, "退款了吗")])[0].outcome is Outcome.OK
    out.close()
    assert _found(path, "退款") == ["id-1", "id-3", "id-4"]
    assert _found(path, "refund") == ["id-2"]
