"""`tokenpulse samples search`: one query, one answer, from the embedded store or Elasticsearch.

What a query means, for both stores:
- free text: every term must appear, in the prompt or in the output (different terms may be in
  different ones); a term is found where its tokens stand in a row, case-insensitively. Tokens
  follow `log_pipeline.analysis`: runs of letters and digits, and every Chinese character on its
  own, so 退款 finds 我要申请退款 and iPhone退款 finds "iPhone 退款"; "quoted words" are one term;
- every other filter is exact (model, version, label, ...) or a closed range (NLL, latency, time);
- feedback: records of feedback stored on its own (`genai_sample.kind` feedback) match only a
  `--feedback` filter or an id lookup; `--feedback negative|neutral|positive|any` finds every
  record carrying feedback of that class: samples kept for their feedback, and feedback records
  (whose sample, when there is one, `samples show <response id>` lists with them);
- the order is the sort key, missing values last, then the record id in the same direction, so
  pages never overlap and both stores list the same records in the same order.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from log_pipeline.analysis import query_terms
from log_pipeline.outputs.sqlite import connect, load_doc
from log_pipeline.record import iso_utc
from log_pipeline.settings import EsAuth

_RELATIVE = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
_STATUS = re.compile(r"^([1-5])(\d\d|xx)$")
CLIENT_ID_PREFIXES = ("cmpl-", "gen-")  # the OpenAI-compatible and native response ids
MAX_RESULT_WINDOW = 10_000  # Elasticsearch's default index.max_result_window (from + size)
TEXT_FIELDS = ("genai_sample.prompt.text", "genai_sample.output.text")
# sort key -> (Elasticsearch field, SQLite column)
SORTS: dict[str, tuple[str, str]] = {
    "time": ("@timestamp", "ts"),
    "nll": ("genai_sample.quality.mean_nll", "mean_nll"),
    "latency": ("genai_sample.timings.total_s", "total_s"),
    "version": ("genai_sample.version_number", "version_number"),
    "status": ("http.response.status_code", "status"),
}
# a field renamed to its standard name -> where records written before the rename hold it (the
# SQLite column is filled from either; Elasticsearch filters look in both, see SCHEMA.md)
LEGACY_FIELDS = {"http.response.status_code": "genai_sample.status"}
# count-by key -> (Elasticsearch field, SQLite column)
GROUPS: dict[str, tuple[str, str]] = {
    "model": ("genai_sample.model", "model"),
    "version": ("genai_sample.version", "version"),
    "finish_reason": ("genai_sample.quality.finish_reason", "finish_reason"),
    "label": ("genai_sample.version_label", "label"),
    "key_id": ("genai_sample.key_id", "key_id"),
    "status": ("http.response.status_code", "status"),
    "error_type": ("error.type", "error_type"),
    "route": ("genai_sample.route", "route"),
    "feedback": ("genai_sample.feedback.class", "feedback"),
}
FEEDBACK_FILTERS = ("any", "negative", "neutral", "positive")
FEEDBACK_KIND = "feedback"  # log_pipeline.record.FEEDBACK_KIND


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


def status_range(text: str) -> tuple[int, int]:
    """An HTTP status (`500`) or class (`5xx`) as the closed range it covers."""
    m = _STATUS.match(text.strip().lower())
    if not m:
        raise SearchError(f"bad status {text!r}: use a code like 503 or a class like 5xx")
    if m.group(2) == "xx":
        low = int(m.group(1)) * 100
        return low, low + 99
    code = int(text)
    return code, code


def id_candidates(text: str) -> list[str]:
    """What an id a client saw may be: itself, and without a `cmpl-`/`gen-` response prefix."""
    text = text.strip()
    out = [text]
    for prefix in CLIENT_ID_PREFIXES:
        if text.startswith(prefix) and len(text) > len(prefix):
            out.append(text[len(prefix) :])
    return out


@dataclass(frozen=True, slots=True)
class Filters:
    """What to look for and in which order; empty fields do not filter."""

    text: str = ""
    id: str = ""  # a record id, a request id, or a response id (cmpl-…, gen-…)
    model: str = ""
    version: str = ""
    label: str = ""
    finish_reason: str = ""
    status: str = ""  # 503 or 5xx
    error_type: str = ""
    key_id: str = ""
    reason: str = ""
    feedback: str = ""  # any | negative | neutral | positive
    nll_min: float | None = None
    nll_max: float | None = None
    latency_min: float | None = None  # seconds, arrival to response
    latency_max: float | None = None
    since: str = ""  # already in @timestamp format (see parse_time)
    until: str = ""
    sort: str = "time"
    ascending: bool = False
    offset: int = 0
    limit: int = 20

    def __post_init__(self) -> None:
        if self.sort not in SORTS:
            raise SearchError(f"bad sort {self.sort!r}: use one of {', '.join(SORTS)}")
        if self.limit < 1 or self.offset < 0:
            raise SearchError("--limit must be at least 1 and --offset at least 0")
        if self.status:
            status_range(self.status)
        if self.feedback and self.feedback not in FEEDBACK_FILTERS:
            raise SearchError(f"bad feedback {self.feedback!r}: use {'|'.join(FEEDBACK_FILTERS)}")

    @property
    def samples_only(self) -> bool:
        """Whether feedback records stay out (no feedback filter and no id lookup)."""
        return not self.feedback and not self.id

    def exact(self) -> list[tuple[str, str]]:
        """(count-by key, value) of the exact filters given."""
        pairs = (("model", self.model), ("version", self.version), ("label", self.label),
                 ("finish_reason", self.finish_reason), ("error_type", self.error_type),
                 ("key_id", self.key_id))  # fmt: skip
        return [(key, value) for key, value in pairs if value]

    def ranges(self) -> list[tuple[str, float | str | None, float | str | None]]:
        """(sort key, low, high) of the closed ranges given (None: open)."""
        out: list[tuple[str, float | str | None, float | str | None]] = []
        for key, low, high in (("nll", self.nll_min, self.nll_max),
                               ("latency", self.latency_min, self.latency_max),
                               ("time", self.since or None, self.until or None)):  # fmt: skip
            if low is not None or high is not None:
                out.append((key, low, high))
        if self.status:
            out.append(("status", *status_range(self.status)))
        return out


Group = tuple[tuple[str, ...], int]


class Store(Protocol):
    """A searchable sample store."""

    def search(self, f: Filters) -> Iterator[dict[str, Any]]:
        """Matching records in the filters' order, from offset, at most limit of them."""
        ...

    def count(self, f: Filters, by: list[str]) -> list[Group]:
        """Matching records counted per group of `by` values, largest group first."""
        ...

    def show(self, record_id: str) -> list[dict[str, Any]]:
        """The records of one record id, request id or response id, oldest first."""
        ...


def fts_query(text: str) -> str:
    """Free text as an FTS5 query: each term a quoted phrase of its tokens, all required."""
    return " AND ".join(f'"{term}"' for term in query_terms(text))


def order_groups(groups: dict[tuple[str, ...], int]) -> list[Group]:
    """Groups largest first, then by their values."""
    return sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))


class SqliteStore:
    """Search in the embedded store."""

    def __init__(self, path: Path) -> None:
        try:
            self.conn = connect(path, create=False)
        except (FileNotFoundError, sqlite3.Error) as exc:
            raise SearchError(f"cannot open the sample store: {exc}") from exc

    def _where(self, f: Filters) -> tuple[str, list[Any]]:
        """FROM ... WHERE for the filters, and its arguments."""
        sql, where, args = "FROM samples s", [], list[Any]()
        if query_terms(f.text):
            sql += " JOIN samples_terms t ON t.rowid = s.rowid AND samples_terms MATCH ?"
            args.append(fts_query(f.text))
        if f.id:
            ids = id_candidates(f.id)
            marks = ", ".join("?" * len(ids))
            where.append(f"(s.id = ? OR s.request_id IN ({marks}))")
            args += [f.id.strip(), *ids]
        for key, value in f.exact():
            where.append(f"s.{GROUPS[key][1]} = ?")
            args.append(value)
        if f.reason:
            where.append("instr(s.reasons, ?) > 0")
            args.append(f"|{f.reason}|")
        if f.samples_only:
            where.append("s.kind != ?")
            args.append(FEEDBACK_KIND)
        if f.feedback == "any":
            where.append("s.feedback != ''")
        elif f.feedback:
            where.append("s.feedback = ?")
            args.append(f.feedback)
        for key, low, high in f.ranges():
            column = SORTS[key][1]
            if low is not None:
                where.append(f"s.{column} >= ?")
                args.append(low)
            if high is not None:
                where.append(f"s.{column} <= ?")
                args.append(high)
        if where:
            sql += " WHERE " + " AND ".join(where)
        return sql, args

    def _rows(self, sql: str, args: list[Any]) -> Iterator[tuple[Any, ...]]:
        try:
            yield from self.conn.execute(sql, args)
        except sqlite3.Error as exc:
            raise SearchError(f"sample store query failed: {exc}") from exc

    def search(self, f: Filters) -> Iterator[dict[str, Any]]:
        """Matching records in the filters' order, from offset, at most limit of them."""
        where, args = self._where(f)
        column, way = SORTS[f.sort][1], "ASC" if f.ascending else "DESC"
        sql = (f"SELECT s.doc {where} ORDER BY (s.{column} IS NULL), s.{column} {way}, s.id {way} "
               "LIMIT ? OFFSET ?")  # fmt: skip
        for row in self._rows(sql, [*args, f.limit, f.offset]):
            yield load_doc(row[0])

    def count(self, f: Filters, by: list[str]) -> list[Group]:
        """Matching records counted per group of `by` values, largest group first."""
        where, args = self._where(f)
        columns = ", ".join(f"s.{GROUPS[key][1]}" for key in by)
        rows = self._rows(f"SELECT {columns}, count(*) {where} GROUP BY {columns}", args)
        return order_groups({tuple(_cell(v) for v in row[:-1]): row[-1] for row in rows})

    def show(self, record_id: str) -> list[dict[str, Any]]:
        """The records of one record id, request id or response id, oldest first."""
        where, args = self._where(Filters(id=record_id))
        sql = f"SELECT s.doc {where} ORDER BY s.ts, s.id"
        return [load_doc(row[0]) for row in self._rows(sql, args)]


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _reason(body: Any) -> str:
    """The reason in an Elasticsearch error body (its first root cause's when there is one)."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return ""
    causes = error.get("root_cause")
    if isinstance(causes, list) and causes and isinstance(causes[0], dict):
        return str(causes[0].get("reason", ""))
    return str(error.get("reason", ""))


def es_query(f: Filters) -> dict[str, Any]:
    """The filters as an Elasticsearch bool query (filter context: no scoring)."""
    flt: list[dict[str, Any]] = []
    for term in query_terms(f.text):
        flt.append({"multi_match": {"query": term, "type": "phrase", "fields": list(TEXT_FIELDS)}})
    if f.id:
        flt.append({"bool": {"should": [
            {"term": {"event.id": f.id.strip()}},
            {"terms": {"genai_sample.request_id": id_candidates(f.id)}},
        ], "minimum_should_match": 1}})  # fmt: skip
    for key, value in f.exact():
        flt.append({"term": {GROUPS[key][0]: value}})
    if f.reason:
        flt.append({"term": {"genai_sample.sampling.reasons": f.reason}})
    if f.feedback == "any":
        flt.append({"exists": {"field": GROUPS["feedback"][0]}})
    elif f.feedback:
        flt.append({"term": {GROUPS["feedback"][0]: f.feedback}})
    if f.samples_only:
        flt.append({"bool": {"must_not": [{"term": {"genai_sample.kind": FEEDBACK_KIND}}]}})
    for key, low, high in f.ranges():
        bounds = {op: v for op, v in (("gte", low), ("lte", high)) if v is not None}
        field = SORTS[key][0]
        if field in LEGACY_FIELDS:  # backing indices from before the rename hold the old name
            either = [{"range": {name: bounds}} for name in (field, LEGACY_FIELDS[field])]
            flt.append({"bool": {"should": either, "minimum_should_match": 1}})
        else:
            flt.append({"range": {field: bounds}})
    return {"bool": {"filter": flt}} if flt else {"match_all": {}}


def es_sort(f: Filters) -> list[dict[str, Any]]:
    """The order: the sort key with missing values last, then the record id (unique)."""
    order = "asc" if f.ascending else "desc"
    return [{SORTS[f.sort][0]: {"order": order, "missing": "_last"}}, {"event.id": order}]


class EsStore:
    """Search in Elasticsearch: from + size within the result window, a point in time with
    search_after beyond it."""

    page = 1000  # hits per request when paging through a point in time

    def __init__(self, url: str, index: str, auth: EsAuth | None = None) -> None:
        from log_pipeline.outputs.elasticsearch import make_client

        self.client = make_client(url, auth, timeout_s=30.0)
        self.url, self.index = url, index

    def _call(self, what: str, fn: Any, **kwargs: Any) -> dict[str, Any]:
        from elastic_transport import TransportError
        from elasticsearch import ApiError

        try:
            return dict(fn(**kwargs).body)
        except ApiError as exc:
            status = exc.meta.status if exc.meta is not None else 0
            raise SearchError(
                f"elasticsearch {what} failed: {status} {_reason(exc.body) or exc.message}"
            ) from exc
        except TransportError as exc:
            raise SearchError(f"elasticsearch {what} failed: {exc}") from exc

    def search(self, f: Filters) -> Iterator[dict[str, Any]]:
        """Matching records in the filters' order, from offset, at most limit of them."""
        query, sort = es_query(f), es_sort(f)
        if f.offset + f.limit <= MAX_RESULT_WINDOW:
            body = self._call("search", self.client.search, index=self.index, query=query,
                              sort=sort, from_=f.offset, size=f.limit)  # fmt: skip
            for hit in body["hits"]["hits"]:
                yield hit["_source"]
            return
        yield from self._paged(f, query, sort)

    def _paged(
        self, f: Filters, query: dict[str, Any], sort: list[dict[str, Any]]
    ) -> Iterator[dict[str, Any]]:
        """Every page through a point in time: a consistent view however long the walk."""
        pit = self._call("open point in time", self.client.open_point_in_time,
                         index=self.index, keep_alive="2m")["id"]  # fmt: skip
        skip, left, after = f.offset, f.limit, None
        try:
            while left > 0:
                size = min(self.page, skip + left) if skip else min(self.page, left)
                extra: dict[str, Any] = {"search_after": after} if after is not None else {}
                body = self._call("search", self.client.search, query=query, sort=sort, size=size,
                                  pit={"id": pit, "keep_alive": "2m"}, **extra)  # fmt: skip
                pit = body.get("pit_id", pit)
                hits = body["hits"]["hits"]
                for hit in hits:
                    if skip:
                        skip -= 1
                    elif left:
                        left -= 1
                        yield hit["_source"]
                if len(hits) < size:
                    return
                after = hits[-1]["sort"]
        finally:
            try:
                self.client.close_point_in_time(id=pit)
            except Exception:  # noqa: BLE001 - it expires on its own
                pass

    def count(self, f: Filters, by: list[str]) -> list[Group]:
        """Matching records counted per group (a composite aggregation, paged to the end)."""
        sources = [{key: {"terms": {"field": GROUPS[key][0], "missing_bucket": True}}}
                   for key in by]  # fmt: skip
        groups: dict[tuple[str, ...], int] = {}
        after: dict[str, Any] | None = None
        while True:
            composite: dict[str, Any] = {"size": 1000, "sources": sources}
            if after is not None:
                composite["after"] = after
            body = self._call("count", self.client.search, index=self.index, query=es_query(f),
                              size=0, aggs={"groups": {"composite": composite}})  # fmt: skip
            agg = body.get("aggregations", {}).get("groups", {})
            for bucket in agg.get("buckets", []):
                key = tuple(_cell(bucket["key"].get(k)) for k in by)
                groups[key] = groups.get(key, 0) + int(bucket["doc_count"])
            after = agg.get("after_key")
            if not agg.get("buckets") or after is None:
                return order_groups(groups)

    def show(self, record_id: str) -> list[dict[str, Any]]:
        """The records of one record id, request id or response id, oldest first."""
        f = Filters(id=record_id, sort="time", ascending=True, limit=MAX_RESULT_WINDOW)
        return list(self.search(f))
