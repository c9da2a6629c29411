"""The embedded store: SQLite with an FTS5 index over prompt and output text (no server).

`INSERT OR IGNORE` on the record id makes a resend harmless; one transaction per batch.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from log_pipeline.outputs import DUPLICATE, OK, Item, ItemResult, Outcome, RetryableError

SCHEMA = """
CREATE TABLE IF NOT EXISTS samples (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    ts TEXT NOT NULL,
    model TEXT NOT NULL DEFAULT '',
    version TEXT NOT NULL DEFAULT '',
    finish_reason TEXT NOT NULL DEFAULT '',
    mean_nll REAL,
    reasons TEXT NOT NULL DEFAULT '',
    key_id TEXT NOT NULL DEFAULT '',
    status INTEGER NOT NULL DEFAULT 0,
    doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS samples_ts ON samples (ts);
CREATE VIRTUAL TABLE IF NOT EXISTS samples_fts USING fts5(prompt, output, content='');
"""


def connect(path: Path, create: bool = True) -> sqlite3.Connection:
    """Open the store (creating the schema when asked)."""
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    elif not path.exists():
        raise FileNotFoundError(f"no sample store at {path}")
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    if create:
        conn.executescript(SCHEMA)
    return conn


def row_of(doc: dict[str, Any]) -> tuple[Any, ...]:
    """The indexed columns of one record (everything else stays in `doc`)."""
    s = doc.get("genai_sample", {})
    quality = s.get("quality", {})
    reasons = s.get("sampling", {}).get("reasons", [])
    return (
        doc["event"]["id"],
        doc["@timestamp"],
        s.get("model", ""),
        s.get("version", ""),
        quality.get("finish_reason", ""),
        quality.get("mean_nll"),
        "|" + "|".join(reasons) + "|",
        s.get("key_id", ""),
        s.get("status", 0),
    )


class SqliteOutput:
    """Insert-or-ignore into the embedded store."""

    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = connect(self.path)
        return self._conn

    def send(self, items: list[Item]) -> list[ItemResult]:
        """Insert every item in one transaction; ids already present count as duplicates."""
        rows, bad = [], {}
        for item in items:
            try:
                rows.append((*row_of(item.doc), item.raw.decode()))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                bad[item.id] = ItemResult(Outcome.PERMANENT, f"not a record: {exc}", "permanent")
        try:
            db = self._db()
            db.execute("BEGIN IMMEDIATE")
            try:
                # rowids only grow, so the rows this batch added are those above the old maximum
                top = db.execute("SELECT coalesce(max(rowid), 0) FROM samples").fetchone()[0]
                db.executemany(
                    "INSERT OR IGNORE INTO samples (id, ts, model, version, finish_reason, "
                    "mean_nll, reasons, key_id, status, doc) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    rows,
                )
                db.execute(
                    "INSERT INTO samples_fts (rowid, prompt, output) SELECT rowid, "
                    "coalesce(json_extract(doc, '$.genai_sample.prompt.text'), ''), "
                    "coalesce(json_extract(doc, '$.genai_sample.output.text'), '') "
                    "FROM samples WHERE rowid > ?",
                    (top,),
                )
                new = {r[0] for r in db.execute("SELECT id FROM samples WHERE rowid > ?", (top,))}
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except (sqlite3.Error, OSError) as exc:
            self.close()  # reopen next time: the file may have been replaced or repaired
            raise RetryableError("server_error", f"sqlite store {self.path}: {exc}") from exc
        results = []
        for item in items:
            if item.id in bad:
                results.append(bad[item.id])
            elif item.id in new:
                new.discard(item.id)  # a repeat inside one batch is a duplicate
                results.append(OK)
            else:
                results.append(DUPLICATE)
        return results

    def close(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def load_doc(text: str) -> dict[str, Any]:
    """A stored record back as a dict."""
    return dict(json.loads(text))
