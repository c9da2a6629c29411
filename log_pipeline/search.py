"""`tokenpulse samples search`: the same filters against the embedded store or Elasticsearch."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from log_pipeline.outputs.sqlite import connect, load_doc
from log_pipeline.record import iso_utc
from log_pipeline.settings import EsAuth

_RELATIVE = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


class SearchError(Exception):
    """Bad filters or an unreachable store; the message is for the user."""


def parse_time(text: str, now: datetime | None = None) -> str:
    """ISO-8601 or a relative age (`15m`, `2h`, `7d`) as the records' @timestamp format."""
    now = now or datetime.now(UTC)
    m = _RELATIVE.match(text.strip())
    if m:
        moment = now - timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
    else:
        try:
            moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise SearchError(
                f"bad time {text!r}: use ISO-8601 or an age like 15m, 2h, 7d"
            ) from exc
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
    return iso_utc(moment.timestamp())


@dataclass(frozen=True, slots=True)
class Filters:
    """What to look for; empty fields do not filter."""

    text: str = ""
    model: str = ""
    version: str = ""
    finish_reason: str = ""
    nll_min: float | None = None
    nll_max: float | None = None
    since: str = ""  # already in @timestamp format (see parse_time)
    until: str = ""
    reason: str = ""
    key_id: str = ""
    limit: int = 20


class Store(Protocol):
    """A searchable sample store."""

    def search(self, f: Filters) -> list[dict[str, Any]]:
        """Matching records, newest first."""
        ...

    def show(self, record_id: str) -> dict[str, Any] | None:
        """One record by id."""
        ...


def fts_query(text: str) -> str:
    """Free text as an FTS5 query: every word must appear (each quoted, so no operators)."""
    words = [w for w in text.split() if w]
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


class SqliteStore:
    """Search in the embedded store."""

    def __init__(self, path: Path) -> None:
        try:
            self.conn = connect(path, create=False)
        except (FileNotFoundError, sqlite3.Error) as exc:
            raise SearchError(f"cannot open the sample store: {exc}") from exc

    def search(self, f: Filters) -> list[dict[str, Any]]:
        """Matching records, newest first."""
        where: list[str] = []
        args: list[str | float | int] = []
        sql = "SELECT s.doc FROM samples s"
        if f.text.strip():
            sql += " JOIN samples_fts ON samples_fts.rowid = s.rowid AND samples_fts MATCH ?"
            args.append(fts_query(f.text))
        exact = (("model", f.model), ("version", f.version), ("finish_reason", f.finish_reason),
                 ("key_id", f.key_id))  # fmt: skip
        for column, value in exact:
            if value:
                where.append(f"s.{column} = ?")
                args.append(value)
        if f.reason:
            where.append("s.reasons LIKE ?")
            args.append(f"%|{f.reason}|%")
        if f.nll_min is not None:
            where.append("s.mean_nll >= ?")
            args.append(f.nll_min)
        if f.nll_max is not None:
            where.append("s.mean_nll <= ?")
            args.append(f.nll_max)
        if f.since:
            where.append("s.ts >= ?")
            args.append(f.since)
        if f.until:
            where.append("s.ts <= ?")
            args.append(f.until)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY s.ts DESC, s.rowid DESC LIMIT ?"
        args.append(f.limit)
        try:
            return [load_doc(row[0]) for row in self.conn.execute(sql, args)]
        except sqlite3.Error as exc:
            raise SearchError(f"sample store query failed: {exc}") from exc

    def show(self, record_id: str) -> dict[str, Any] | None:
        """One record by id."""
        row = self.conn.execute("SELECT doc FROM samples WHERE id = ?", (record_id,)).fetchone()
        return load_doc(row[0]) if row else None


def es_query(f: Filters) -> dict[str, Any]:
    """The filters as an Elasticsearch bool query."""
    must: list[dict[str, Any]] = []
    flt: list[dict[str, Any]] = []
    if f.text.strip():
        fields = ["genai_sample.prompt.text", "genai_sample.output.text"]
        must.append({"multi_match": {"query": f.text, "operator": "and", "fields": fields}})
    for field, value in (("genai_sample.model", f.model), ("genai_sample.version", f.version),
                         ("gen_ai.response.finish_reasons", f.finish_reason),
                         ("genai_sample.sampling.reasons", f.reason),
                         ("genai_sample.key_id", f.key_id)):  # fmt: skip
        if value:
            flt.append({"term": {field: value}})
    nll = {k: v for k, v in (("gte", f.nll_min), ("lte", f.nll_max)) if v is not None}
    if nll:
        flt.append({"range": {"genai_sample.quality.mean_nll": nll}})
    ts = {k: v for k, v in (("gte", f.since), ("lte", f.until)) if v}
    if ts:
        flt.append({"range": {"@timestamp": ts}})
    if not must and not flt:
        return {"match_all": {}}
    return {"bool": {"must": must, "filter": flt}}


class EsStore:
    """Search in Elasticsearch."""

    def __init__(self, url: str, index: str, auth: EsAuth | None = None) -> None:
        from log_pipeline.outputs.elasticsearch import make_client

        self.client = make_client(url, auth, timeout_s=30.0)
        self.index = index

    def _hits(self, query: dict[str, Any], size: int) -> list[dict[str, Any]]:
        from elastic_transport import TransportError
        from elasticsearch import ApiError

        try:
            resp = self.client.search(
                index=self.index, query=query, size=size, sort=[{"@timestamp": {"order": "desc"}}]
            )
        except (ApiError, TransportError) as exc:
            raise SearchError(f"elasticsearch search failed: {exc}") from exc
        return [h["_source"] for h in resp.body["hits"]["hits"]]

    def search(self, f: Filters) -> list[dict[str, Any]]:
        """Matching records, newest first."""
        return self._hits(es_query(f), f.limit)

    def show(self, record_id: str) -> dict[str, Any] | None:
        """One record by id."""
        hits = self._hits({"term": {"event.id": record_id}}, 1)
        return hits[0] if hits else None


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def table(records: list[dict[str, Any]]) -> str:
    """Records as an aligned text table."""
    head = ("TIME", "ID", "MODEL", "VER", "FINISH", "NLL", "REASON", "KEY", "PROMPT", "OUTPUT")
    rows = [head]
    for r in records:
        s = r.get("genai_sample", {})
        q = s.get("quality", {})
        nll = q.get("mean_nll")
        rows.append((
            r.get("@timestamp", "")[:19], r.get("event", {}).get("id", ""), s.get("model", ""),
            s.get("version", ""), q.get("finish_reason", "-"),
            f"{nll:.2f}" if isinstance(nll, int | float) else "-",
            ",".join(s.get("sampling", {}).get("reasons", [])), s.get("key_id", ""),
            _cut(s.get("prompt", {}).get("text", ""), 30),
            _cut(s.get("output", {}).get("text", ""), 30),
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
