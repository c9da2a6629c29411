"""The Elasticsearch stand-in's search: the query DSL subset `samples search` and Kibana-like
clients send, with Elasticsearch's semantics (NOT Elasticsearch).

Fields are typed as the genai-samples mapping types them (`log_pipeline.assets.FIELD_TYPES`; a
field it does not list is a keyword): `text` fields are analyzed by the mapping's analyzer
(`log_pipeline.analysis.tokens`: every Chinese character a token), keywords match exactly, dates
and numbers compare as such.

- queries: match_all, match_none, bool (must, filter, should, must_not, minimum_should_match),
  term, terms, ids, exists, prefix, range (dates and numbers), match (operator or/and,
  minimum_should_match as a count), match_phrase, multi_match (best_fields, most_fields,
  cross_fields, phrase; operator);
- sort on several fields (`missing` _last/_first, `_doc`), hits carrying their `sort` values (dates
  as epoch milliseconds, as ES returns them), `search_after`, `from` + `size` refused past
  `index.max_result_window` (10,000) as ES refuses it, `track_total_hits` (10,000 by default),
  `collapse` on a keyword (the first hit of each value);
- aggregations: `terms` (count desc, key asc; size) and `composite` with terms sources
  (`missing_bucket`, `size`, `after` / `after_key`), each with `doc_count`.
"""

from __future__ import annotations

import functools
import math
from datetime import datetime
from typing import Any

from log_pipeline.analysis import tokens
from log_pipeline.assets import FIELD_TYPES

MAX_RESULT_WINDOW = 10_000
TRACK_TOTAL_HITS = 10_000
NUMERIC = {"long", "integer", "short", "byte", "double", "float", "half_float", "scaled_float"}
TEXT = {"text", "match_only_text"}
Hit = tuple[str, str, dict[str, Any]]  # (index, _id, _source)


class QueryError(Exception):
    """A request Elasticsearch would refuse with 400; `kind` is its error type."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind


def field_type(path: str) -> str:
    """The mapped type of a field (keyword when the mapping does not list it)."""
    return FIELD_TYPES.get(path.removesuffix(".keyword"), "keyword")


def values(doc: Any, path: str) -> list[Any]:
    """Every value at a dotted path (arrays flattened), as Elasticsearch sees a field."""
    if isinstance(doc, dict) and path in doc:  # "@timestamp", or a dotted key kept flat
        got = doc[path]
        return list(got) if isinstance(got, list) else [got]
    current = [doc]
    for part in path.split("."):
        nxt: list[Any] = []
        for value in current:
            if isinstance(value, dict) and part in value:
                got = value[part]
                nxt.extend(got if isinstance(got, list) else [got])
        current = nxt
    return [v for v in current if v is not None]


def _millis(value: Any) -> int | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return round(moment.timestamp() * 1000)


def doc_value(path: str, value: Any) -> Any:
    """A value as the field's doc values hold it: dates in ms, numbers as floats or ints."""
    kind = field_type(path)
    if kind == "date":
        return _millis(value)
    if kind in NUMERIC:
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        return int(number) if kind not in {"double", "float", "half_float"} else number
    if kind == "boolean":
        return value in (True, "true")
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def _field_values(doc: dict[str, Any], path: str) -> list[Any]:
    found = [doc_value(path, v) for v in values(doc, path)]
    return [v for v in found if v is not None]


def _analyzed(doc: dict[str, Any], path: str) -> list[list[str]]:
    """The token lists of each value of a field (a phrase never spans two values)."""
    if field_type(path) in TEXT:
        return [tokens(str(v)) for v in values(doc, path)]
    return [[str(v)] for v in _field_values(doc, path)]  # a keyword is one token, as indexed


def _query_tokens(path: str, text: Any) -> list[str]:
    return tokens(str(text)) if field_type(path) in TEXT else [str(doc_value(path, text))]


def _has_phrase(runs: list[list[str]], phrase: list[str]) -> bool:
    n = len(phrase)
    return any(run[i : i + n] == phrase for run in runs for i in range(len(run) - n + 1))


def _match_field(
    doc: dict[str, Any], path: str, text: Any, operator: str = "or", minimum: int = 1
) -> bool:
    wanted = _query_tokens(path, text)
    if not wanted:
        return False  # zero_terms_query: none
    have = {t for run in _analyzed(doc, path) for t in run}
    found = sum(1 for t in wanted if t in have)
    return found == len(wanted) if operator.lower() == "and" else found >= max(minimum, 1)


def _phrase_field(doc: dict[str, Any], path: str, text: Any) -> bool:
    wanted = _query_tokens(path, text)
    return bool(wanted) and _has_phrase(_analyzed(doc, path), wanted)


def _fields(spec: dict[str, Any]) -> list[str]:
    return [f.split("^", 1)[0] for f in spec.get("fields", [])]


def _multi_match(doc: dict[str, Any], spec: dict[str, Any]) -> bool:
    kind = spec.get("type", "best_fields")
    fields, text = _fields(spec), spec["query"]
    operator = str(spec.get("operator", "or")).lower()
    if kind in ("phrase", "phrase_prefix"):
        return any(_phrase_field(doc, f, text) for f in fields)
    if kind in ("best_fields", "most_fields"):  # field-centric: the operator holds per field
        return any(_match_field(doc, f, text, operator) for f in fields)
    if kind == "cross_fields":  # term-centric: each term in any one of the fields
        wanted = [t for f in fields[:1] for t in _query_tokens(f, text)]
        if not wanted:
            return False
        have = {t for f in fields for run in _analyzed(doc, f) for t in run}
        found = sum(1 for t in wanted if t in have)
        return found == len(wanted) if operator == "and" else found >= 1
    raise QueryError("parsing_exception", f"multi_match type [{kind}] is not supported here")


def _group(spec: dict[str, Any], name: str) -> list[dict[str, Any]]:
    value = spec.get(name, [])
    return value if isinstance(value, list) else [value]


def _range(doc: dict[str, Any], spec: dict[str, Any]) -> bool:
    path, bounds = next(iter(spec.items()))
    ops = {"gte": lambda a, b: a >= b, "gt": lambda a, b: a > b,
           "lte": lambda a, b: a <= b, "lt": lambda a, b: a < b}  # fmt: skip
    limits = [(ops[op], doc_value(path, b)) for op, b in bounds.items() if op in ops]
    return any(all(cmp(v, b) for cmp, b in limits) for v in _field_values(doc, path))


def matches(doc: dict[str, Any], query: dict[str, Any]) -> bool:
    """Whether a document matches a query."""
    if not query:
        return True
    kind, spec = next(iter(query.items()))
    if kind == "match_all":
        return True
    if kind == "match_none":
        return False
    if kind == "bool":
        if not all(matches(doc, q) for q in _group(spec, "must") + _group(spec, "filter")):
            return False
        if any(matches(doc, q) for q in _group(spec, "must_not")):
            return False
        should = _group(spec, "should")
        required = spec.get("minimum_should_match")
        if required is None:  # 1 unless the bool has a must or filter clause
            required = 0 if _group(spec, "must") + _group(spec, "filter") else 1
        return not should or sum(matches(doc, q) for q in should) >= int(required)
    if kind == "term":
        path, want = next(iter(spec.items()))
        want = want.get("value") if isinstance(want, dict) else want
        return doc_value(path, want) in _field_values(doc, path)
    if kind == "terms":
        path, wants = next(iter(spec.items()))
        have = _field_values(doc, path)
        return any(doc_value(path, w) in have for w in wants)
    if kind == "exists":
        return bool(values(doc, spec["field"]))
    if kind == "prefix":
        path, want = next(iter(spec.items()))
        want = want.get("value") if isinstance(want, dict) else want
        return any(str(v).startswith(str(want)) for v in _field_values(doc, path))
    if kind == "range":
        return _range(doc, spec)
    if kind == "match":
        path, want = next(iter(spec.items()))
        if isinstance(want, dict):
            minimum = want.get("minimum_should_match", 1)
            return _match_field(doc, path, want["query"], want.get("operator", "or"),
                                int(minimum) if str(minimum).isdigit() else 1)  # fmt: skip
        return _match_field(doc, path, want)
    if kind == "match_phrase":
        path, want = next(iter(spec.items()))
        return _phrase_field(doc, path, want.get("query") if isinstance(want, dict) else want)
    if kind == "multi_match":
        return _multi_match(doc, spec)
    raise QueryError("parsing_exception", f"unknown query [{kind}] (not in the stand-in's subset)")


# sorting -----------------------------------------------------------------------------------------
def _sort_specs(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(field, order, missing) per sort clause."""
    out = []
    raw = body.get("sort", [])
    for spec in raw if isinstance(raw, list) else [raw]:
        if isinstance(spec, str):
            out.append((spec, "desc" if spec == "_score" else "asc", "_last"))
            continue
        path, how = next(iter(spec.items()))
        if isinstance(how, dict):
            out.append((path, how.get("order", "asc"), how.get("missing", "_last")))
        else:
            out.append((path, str(how), "_last"))
    return out


def _sort_value(hit: Hit, position: int, path: str, order: str) -> Any:
    if path == "_doc":
        return position
    if path == "_score":
        return 1.0
    found = _field_values(hit[2], path)
    if not found:
        return None
    return max(found) if order == "desc" else min(found)  # ES's default mode per order


def _compare(a: Any, b: Any, order: str, missing: str) -> int:
    """-1/0/1 for two sort values of one clause; None is a missing value."""
    if a is None or b is None:
        if a is None and b is None:
            return 0
        last = 1 if missing == "_last" else -1
        return last if a is None else -last
    if isinstance(a, str) != isinstance(b, str):
        a, b = str(a), str(b)
    result = (a > b) - (a < b)
    return -result if order == "desc" else result


def _cmp_rows(specs: list[tuple[str, str, str]], x: list[Any], y: list[Any]) -> int:
    for (_path, order, missing), a, b in zip(specs, x, y, strict=True):
        c = _compare(a, b, order, missing)
        if c:
            return c
    return 0


def _json_sort_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


# search ------------------------------------------------------------------------------------------
def search(hits: list[Hit], body: dict[str, Any]) -> dict[str, Any]:
    """A `_search` response over the documents the query matched (in index order)."""
    start, size = int(body.get("from", 0) or 0), int(body.get("size", 10))
    after = body.get("search_after")
    if start + size > MAX_RESULT_WINDOW:
        raise QueryError(
            "illegal_argument_exception",
            f"Result window is too large, from + size must be less than or equal to: "
            f"[{MAX_RESULT_WINDOW}] but was [{start + size}]. See the scroll api for a more "
            "efficient way to request large data sets. This limit can be set by changing the "
            "[index.max_result_window] index level setting.",
        )
    specs = _sort_specs(body)
    keyed: list[tuple[list[Any], Hit]] = [
        ([_sort_value(h, i, p, o) for p, o, _m in specs], h) for i, h in enumerate(hits)
    ]
    if specs:

        def by_sort(x: tuple[list[Any], Hit], y: tuple[list[Any], Hit]) -> int:
            return _cmp_rows(specs, x[0], y[0])

        keyed.sort(key=functools.cmp_to_key(by_sort))
    if after is not None:
        if not specs:
            raise QueryError("illegal_argument_exception", "search_after needs a sort")
        if len(after) != len(specs):
            raise QueryError(
                "illegal_argument_exception",
                f"search_after has {len(after)} value(s) but sort has {len(specs)}.",
            )
        if start > 0:
            raise QueryError(
                "illegal_argument_exception",
                "[from] parameter must be set to 0 when [search_after] is used",
            )
        wanted = [None if v is None else doc_value(p, v) for (p, _o, _m), v in zip(
            specs, after, strict=True)]  # fmt: skip
        keyed = [k for k in keyed if _cmp_rows(specs, k[0], wanted) > 0]
    collapse = body.get("collapse", {}).get("field")
    if collapse:
        seen: set[Any] = set()
        kept = []
        for k in keyed:
            key = tuple(_field_values(k[1][2], collapse)) or None
            if key not in seen:
                seen.add(key)
                kept.append(k)
        keyed = kept
    total = len(keyed)
    track = body.get("track_total_hits", TRACK_TOTAL_HITS)
    limit = total if track is True else (0 if track is False else int(track))
    out: dict[str, Any] = {
        "took": 1,
        "timed_out": False,
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
    }
    hits_out = []
    for sort_values, (index, doc_id, doc) in keyed[start : start + size]:
        hit: dict[str, Any] = {"_index": index, "_id": doc_id, "_score": None if specs else 1.0,
                               "_source": doc}  # fmt: skip
        if specs:
            hit["sort"] = [_json_sort_value(v) for v in sort_values]
        hits_out.append(hit)
    out["hits"] = {"hits": hits_out}
    if track is not False:
        relation = "gte" if track is not True and total > limit else "eq"
        out["hits"]["total"] = {"value": min(total, limit), "relation": relation}
    aggs = body.get("aggs") or body.get("aggregations")
    if aggs:  # over every match: search_after and collapse shape the hits only
        out["aggregations"] = {name: aggregate(hits, spec) for name, spec in aggs.items()}
    return out


def aggregate(hits: list[Hit], spec: dict[str, Any]) -> dict[str, Any]:
    """One aggregation over the matched documents."""
    if "terms" in spec:
        terms = spec["terms"]
        counts: dict[Any, int] = {}
        for _i, _id, doc in hits:
            for v in set(_field_values(doc, terms["field"])):
                counts[v] = counts.get(v, 0) + 1
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        size = int(terms.get("size", 10))
        shown = ranked[:size]
        return {"doc_count_error_upper_bound": 0,
                "sum_other_doc_count": sum(n for _k, n in ranked[size:]),
                "buckets": [{"key": k, "doc_count": n} for k, n in shown]}  # fmt: skip
    if "composite" in spec:
        return _composite(hits, spec["composite"])
    raise QueryError("parsing_exception", f"aggregation {sorted(spec)} is not in the subset")


def _composite(hits: list[Hit], spec: dict[str, Any]) -> dict[str, Any]:
    sources = [(name, src["terms"]) for item in spec["sources"] for name, src in item.items()]
    counts: dict[tuple[Any, ...], int] = {}
    for _i, _id, doc in hits:
        keys: list[list[Any]] = [[]]
        skip = False
        for _name, terms in sources:
            found = sorted(set(_field_values(doc, terms["field"])))
            if not found:
                if not terms.get("missing_bucket"):
                    skip = True
                    break
                found = [None]
            keys = [k + [v] for k in keys for v in found]
        if not skip:
            for k in keys:
                counts[tuple(k)] = counts.get(tuple(k), 0) + 1
    specs = [(name, terms.get("order", "asc"), "_first") for name, terms in sources]

    def by_key(a: tuple[Any, ...], b: tuple[Any, ...]) -> int:
        return _cmp_rows(specs, list(a), list(b))

    ordered = sorted(counts, key=functools.cmp_to_key(by_key))
    after = spec.get("after")
    if after is not None:
        wanted = [None if after.get(name) is None else doc_value(terms["field"], after[name])
                  for name, terms in sources]  # fmt: skip
        ordered = [k for k in ordered if _cmp_rows(specs, list(k), wanted) > 0]
    page = ordered[: int(spec.get("size", 10))]
    buckets = [{"key": {name: v for (name, _t), v in zip(sources, k, strict=True)},
                "doc_count": counts[k]} for k in page]  # fmt: skip
    out: dict[str, Any] = {"buckets": buckets}
    if buckets:
        out["after_key"] = buckets[-1]["key"]
    return out
