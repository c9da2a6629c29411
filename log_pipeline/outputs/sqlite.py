"""The embedded store: SQLite with an FTS5 index over prompt and output text (no server).

The index holds the text as `log_pipeline.analysis` tokenizes it (every Chinese character a token,
so one-, two- and three-character words are found as phrases); a store of an older layout is
migrated, and every row reindexed, when it is opened.

`INSERT OR IGNORE` on the record id makes a resend harmless; one transaction per batch. SQLite
reads the indexed columns out of each raw line itself and fills the FTS index for the whole batch
in one statement: the shipper never parses a record in Python on this path.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from log_pipeline.analysis import index_text
from log_pipeline.outputs import DUPLICATE, OK, Item, ItemResult, Outcome, RetryableError
from log_pipeline.record import iso_utc

SCHEMA_VERSION = 3  # PRAGMA user_version; 0 is the first layout (FTS5 unicode61 over raw text)
TERMS_VERSION = 2  # the layout that brought the analyzed-text index: older stores reindex
TABLE = """
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
)
"""
# columns added by schemas 2 and 3 (kind, feedback): (name, declaration, the JSON path read)
ADDED = (
    ("request_id", "TEXT NOT NULL DEFAULT ''", "$.genai_sample.request_id"),
    ("route", "TEXT NOT NULL DEFAULT ''", "$.genai_sample.route"),
    ("label", "TEXT NOT NULL DEFAULT ''", "$.genai_sample.version_label"),
    ("error_type", "TEXT NOT NULL DEFAULT ''", "$.error.type"),
    ("total_s", "REAL", "$.genai_sample.timings.total_s"),
    ("version_number", "INTEGER", "$.genai_sample.version_number"),
    ("kind", "TEXT NOT NULL DEFAULT ''", "$.genai_sample.kind"),
    ("feedback", "TEXT NOT NULL DEFAULT ''", "$.genai_sample.feedback.class"),
)
INDEXES = (
    "CREATE INDEX IF NOT EXISTS samples_ts ON samples (ts)",
    "CREATE INDEX IF NOT EXISTS samples_request ON samples (request_id)",
)
# the analyzed text (log_pipeline.analysis): tokens split at spaces by the `ascii` tokenizer
TERMS = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS samples_terms USING fts5(prompt, output, content='', "
    "tokenize='ascii')"
)


def connect(path: Path, create: bool = True) -> sqlite3.Connection:
    """Open the store (creating the schema when asked), migrated to the current schema."""
    if create:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # prompts and outputs: private; SQLite gives its -wal and -shm files the same mode
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    elif not path.exists():
        raise FileNotFoundError(f"no sample store at {path}")
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.create_function("tp_index_text", 1, index_text, deterministic=True)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
        migrate(conn, create)
    return conn


def migrate(conn: sqlite3.Connection, create: bool = True) -> None:
    """Bring a store to SCHEMA_VERSION in one transaction: new columns filled from each record,
    the analyzed-text index built for every row, the first layout's raw-text index dropped."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'samples'"
        ).fetchone()
        if conn.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION or not (
            exists or create
        ):
            conn.execute("COMMIT")  # another process migrated it, or there is nothing to migrate
            return
        reindex = conn.execute("PRAGMA user_version").fetchone()[0] < TERMS_VERSION
        conn.execute(TABLE)
        have = {row[1] for row in conn.execute("PRAGMA table_info(samples)")}
        for name, decl, json_path in ADDED:
            if name not in have:
                conn.execute(f"ALTER TABLE samples ADD COLUMN {name} {decl}")
                default = "''" if "TEXT" in decl else "NULL"
                conn.execute(
                    f"UPDATE samples SET {name} = coalesce(json_extract(doc, '{json_path}'), "
                    f"{default}) WHERE json_valid(doc)"
                )
        for statement in INDEXES:
            conn.execute(statement)
        if reindex or not exists:
            conn.execute("DROP TABLE IF EXISTS samples_fts")
            conn.execute("DROP TABLE IF EXISTS samples_terms")
            conn.execute(TERMS)
            index_rows(conn, 0)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


# The columns come out of the raw JSON inside SQLite (its C parser is ~10x faster than parsing
# each line in Python): one json_extract with every path parses a line once into a small array.
_META = (
    "$.genai_sample.model",
    "$.genai_sample.version",
    "$.genai_sample.quality.finish_reason",
    "$.genai_sample.quality.mean_nll",
    "$.genai_sample.sampling.reasons",
    "$.genai_sample.key_id",
    "$.http.response.status_code",
    *(json_path for _name, _decl, json_path in ADDED),
)
_IS_RECORD = "json_valid(?3) AND ltrim(?3) LIKE '{%'"
_ADDED_VALUES = ", ".join(
    f"coalesce(m->>{7 + i}, '')" if "TEXT" in decl else f"m->>{7 + i}"
    for i, (_name, decl, _path) in enumerate(ADDED)
)
# one prepared statement run per line (executemany): a line that is not a JSON object inserts
# nothing and is answered as permanent
_INSERT = (
    "INSERT OR IGNORE INTO samples (id, ts, model, version, finish_reason, mean_nll, reasons, "
    f"key_id, status, {', '.join(name for name, _decl, _path in ADDED)}, doc) "
    "SELECT ?1, ?2, coalesce(m->>0, ''), coalesce(m->>1, ''), "
    "coalesce(m->>2, ''), m->>3, "
    "'|' || coalesce((SELECT group_concat(value, '|') FROM json_each(m, '$[4]')), '') || '|', "
    # a line spooled before the status moved to http.response.status_code holds it under
    # genai_sample.status (coalesce reads that only when the new one is missing)
    "coalesce(m->>5, ''), coalesce(m->>6, ?3->>'$.genai_sample.status', 0), "
    f"{_ADDED_VALUES}, ?3 FROM (SELECT json_extract(?3, "
    + ", ".join(f"'{p}'" for p in _META)
    + f") AS m) WHERE {_IS_RECORD}"
)
# SQLite's json_extract ends a string at an escaped NUL (\u0000), so a word after one would never
# be found: lines holding that escape (rare) are indexed from Python, with NULs made spaces
_NUL = "'\\u0000'"
_TERMS = (
    "INSERT INTO samples_terms (rowid, prompt, output) SELECT rowid, "
    "tp_index_text(json_extract(doc, '$.genai_sample.prompt.text')), "
    "tp_index_text(json_extract(doc, '$.genai_sample.output.text')) "
    f"FROM samples WHERE rowid > ? AND instr(doc, {_NUL}) = 0 AND json_valid(doc)"
)
_NUL_ROWS = f"SELECT rowid, doc FROM samples WHERE rowid > ? AND instr(doc, {_NUL}) > 0"
_TERMS_ROW = "INSERT INTO samples_terms (rowid, prompt, output) VALUES (?, ?, ?)"
_CHECK = f"SELECT {_IS_RECORD.replace('?3', '?1')}"
_BAD = ItemResult(Outcome.PERMANENT, "not a record: not a JSON object", "permanent")


def index_rows(conn: sqlite3.Connection, above: int) -> None:
    """Index the text of every row whose rowid is above `above` (inside the caller's
    transaction): the whole set in one statement, rows holding an escaped NUL from Python."""
    conn.execute(_TERMS, (above,))
    for rowid, doc in conn.execute(_NUL_ROWS, (above,)).fetchall():
        conn.execute(_TERMS_ROW, (rowid, *map(index_text, _fts_texts(doc))))


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


# retention: the index rows of what is deleted go first (a contentless FTS5 table forgets a row
# only when told its indexed text again)
_FORGET_TERMS = (
    "INSERT INTO samples_terms (samples_terms, rowid, prompt, output) SELECT 'delete', rowid, "
    "tp_index_text(json_extract(doc, '$.genai_sample.prompt.text')), "
    "tp_index_text(json_extract(doc, '$.genai_sample.output.text')) "
    f"FROM samples WHERE ts < ? AND instr(doc, {_NUL}) = 0 AND json_valid(doc)"
)
_OLD_NUL_ROWS = f"SELECT rowid, doc FROM samples WHERE ts < ? AND instr(doc, {_NUL}) > 0"
_FORGET_ROW = (
    "INSERT INTO samples_terms (samples_terms, rowid, prompt, output) VALUES ('delete', ?, ?, ?)"
)
PRUNE_EVERY_S = 3600.0


class SqliteOutput:
    """Insert-or-ignore into the embedded store; records older than `retention_days` (0: none)
    are deleted, with their index rows, at the first batch and then hourly."""

    name = "sqlite"

    def __init__(self, path: Path, retention_days: float = 0.0) -> None:
        self.path = path
        self.retention_days = retention_days
        self._conn: sqlite3.Connection | None = None
        self._pruned_at = 0.0

    def prune(self, now: float | None = None) -> int:
        """Delete the records past retention (one transaction); how many."""
        if self.retention_days <= 0:
            return 0
        cutoff = iso_utc((time.time() if now is None else now) - self.retention_days * 86_400)
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(_FORGET_TERMS, (cutoff,))
            for rowid, doc in db.execute(_OLD_NUL_ROWS, (cutoff,)).fetchall():
                db.execute(_FORGET_ROW, (rowid, *map(index_text, _fts_texts(doc))))
            deleted = db.execute("DELETE FROM samples WHERE ts < ?", (cutoff,)).rowcount
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._pruned_at = time.monotonic()
        return int(deleted)

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
                index_rows(db, top)  # the text of the whole batch in one statement
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
        if self.retention_days > 0 and (
            not self._pruned_at or time.monotonic() - self._pruned_at >= PRUNE_EVERY_S
        ):
            try:
                self.prune()
            except sqlite3.Error:  # the batch is stored: retention waits for the next try
                self._pruned_at = time.monotonic()
        return results

    def close(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def load_doc(text: str) -> dict[str, Any]:
    """A stored record back as a dict."""
    return dict(json.loads(text))
