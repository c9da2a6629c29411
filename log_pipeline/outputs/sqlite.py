"""The embedded store: SQLite with an FTS5 index over prompt and output text (no server).

`INSERT OR IGNORE` on the record id makes a resend harmless; one transaction per batch. SQLite
reads the indexed columns out of each raw line itself and fills the FTS index for the whole batch
in one statement: the shipper never parses a record in Python on this path.
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


# The columns come out of the raw JSON inside SQLite (its C parser is ~10x faster than parsing
# each line in Python): one json_extract with every path parses a line once into a small array.
_META = (
    "$.genai_sample.model",
    "$.genai_sample.version",
    "$.genai_sample.quality.finish_reason",
    "$.genai_sample.quality.mean_nll",
    "$.genai_sample.sampling.reasons",
    "$.genai_sample.key_id",
    "$.genai_sample.status",
)
_IS_RECORD = "json_valid(?3) AND ltrim(?3) LIKE '{%'"
# one prepared statement run per line (executemany): a line that is not a JSON object inserts
# nothing and is answered as permanent
_INSERT = (
    "INSERT OR IGNORE INTO samples (id, ts, model, version, finish_reason, mean_nll, reasons, "
    "key_id, status, doc) SELECT ?1, ?2, coalesce(m->>0, ''), coalesce(m->>1, ''), "
    "coalesce(m->>2, ''), m->>3, "
    "'|' || coalesce((SELECT group_concat(value, '|') FROM json_each(m, '$[4]')), '') || '|', "
    "coalesce(m->>5, ''), coalesce(m->>6, 0), ?3 FROM (SELECT json_extract(?3, "
    + ", ".join(f"'{p}'" for p in _META)
    + f") AS m) WHERE {_IS_RECORD}"
)
# SQLite's json_extract ends a string at an escaped NUL (\u0000), so a word after one would never
# be found: lines holding that escape (rare) are indexed from Python, with NULs made spaces
_NUL = "'\\u0000'"
_FTS = (
    "INSERT INTO samples_fts (rowid, prompt, output) SELECT rowid, "
    "coalesce(json_extract(doc, '$.genai_sample.prompt.text'), ''), "
    "coalesce(json_extract(doc, '$.genai_sample.output.text'), '') "
    f"FROM samples WHERE rowid > ? AND instr(doc, {_NUL}) = 0"
)
_NUL_ROWS = f"SELECT rowid, doc FROM samples WHERE rowid > ? AND instr(doc, {_NUL}) > 0"
_FTS_ROW = "INSERT INTO samples_fts (rowid, prompt, output) VALUES (?, ?, ?)"
_CHECK = f"SELECT {_IS_RECORD.replace('?3', '?1')}"
_BAD = ItemResult(Outcome.PERMANENT, "not a record: not a JSON object", "permanent")


def _fts_texts(doc: str) -> tuple[str, str]:
    """Prompt and output text of a record for the FTS index, NULs made spaces."""
    sample = json.loads(doc).get("genai_sample")
    texts = []
    for field in ("prompt", "output"):
        part = sample.get(field) if isinstance(sample, dict) else None
        text = part.get("text") if isinstance(part, dict) else None
        texts.append(text.replace("\x00", " ") if isinstance(text, str) else "")
    return texts[0], texts[1]


def _text(raw: bytes) -> str:
    """The line as text; "" (not a record, so never inserted) when it is not UTF-8."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return ""


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
        rows = [(it.id, it.timestamp, _text(it.raw)) for it in items]
        try:
            db = self._db()
            db.execute("BEGIN IMMEDIATE")
            try:
                # rowids only grow, so the rows this batch added are those above the old maximum
                top = db.execute("SELECT coalesce(max(rowid), 0) FROM samples").fetchone()[0]
                db.executemany(_INSERT, rows)
                db.execute(_FTS, (top,))  # the FTS rows of the whole batch in one statement
                for rowid, doc in db.execute(_NUL_ROWS, (top,)).fetchall():
                    db.execute(_FTS_ROW, (rowid, *_fts_texts(doc)))
                new = {r[0] for r in db.execute("SELECT id FROM samples WHERE rowid > ?", (top,))}
                results = []
                for item, row in zip(items, rows, strict=True):
                    if item.id in new:
                        new.discard(item.id)  # a repeat inside one batch is a duplicate
                        results.append(OK)
                    elif row[2] and db.execute(_CHECK, (row[2],)).fetchone()[0]:  # resends
                        results.append(DUPLICATE)
                    else:
                        results.append(_BAD)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except (sqlite3.Error, OSError) as exc:
            self.close()  # reopen next time: the file may have been replaced or repaired
            raise RetryableError("server_error", f"sqlite store {self.path}: {exc}") from exc
        return results

    def close(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def load_doc(text: str) -> dict[str, Any]:
    """A stored record back as a dict."""
    return dict(json.loads(text))
