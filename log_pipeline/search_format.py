"""How `samples search` writes what it found: a text table, JSON lines or CSV, and group counts."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from log_pipeline.search import LEGACY_FIELDS, Group

# CSV column -> dotted path in the record
CSV_COLUMNS: dict[str, str] = {
    "timestamp": "@timestamp",
    "id": "event.id",
    "request_id": "genai_sample.request_id",
    "model": "genai_sample.model",
    "version": "genai_sample.version",
    "label": "genai_sample.version_label",
    "route": "genai_sample.route",
    "status": "http.response.status_code",
    "error_type": "error.type",
    "finish_reason": "genai_sample.quality.finish_reason",
    "mean_nll": "genai_sample.quality.mean_nll",
    "total_s": "genai_sample.timings.total_s",
    "key_id": "genai_sample.key_id",
    "reasons": "genai_sample.sampling.reasons",
    "feedback": "genai_sample.feedback.class",
    "feedback_score": "genai_sample.feedback.score",
    "feedback_comment": "genai_sample.feedback.comment",
    "prompt": "genai_sample.prompt.text",
    "output": "genai_sample.output.text",
}


def value_at(record: dict[str, Any], path: str) -> Any:
    """The value at a dotted path, or None (a renamed field is read under its old name from
    records written before the rename)."""
    node: Any = record
    for part in path.split(".") if path != "@timestamp" else [path]:
        if not isinstance(node, dict):
            node = None
            break
        node = node.get(part)
    if node is None and path in LEGACY_FIELDS:
        return value_at(record, LEGACY_FIELDS[path])
    return node


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _rows(records: Iterable[dict[str, Any]]) -> Iterator[tuple[str, ...]]:
    for r in records:
        s = r.get("genai_sample", {})
        q = s.get("quality", {})
        nll, total = q.get("mean_nll"), s.get("timings", {}).get("total_s")
        yield (
            r.get("@timestamp", "")[:19], s.get("request_id", ""), s.get("model", ""),
            s.get("version", ""), str(value_at(r, "http.response.status_code") or ""),
            q.get("finish_reason", "-"),
            f"{nll:.2f}" if isinstance(nll, int | float) else "-",
            f"{total:.3f}" if isinstance(total, int | float) else "-",
            ",".join(s.get("sampling", {}).get("reasons", [])),
            s.get("feedback", {}).get("class", "-"), s.get("key_id", ""),
            _cut(s.get("prompt", {}).get("text", ""), 30),
            _cut(s.get("output", {}).get("text", ""), 30),
        )  # fmt: skip


def table(records: Iterable[dict[str, Any]]) -> str:
    """Records as an aligned text table."""
    head = ("TIME", "REQUEST", "MODEL", "VER", "STATUS", "FINISH", "NLL", "TOTAL_S", "REASON",
            "FEEDBACK", "KEY", "PROMPT", "OUTPUT")  # fmt: skip
    rows = [head, *_rows(records)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def write_jsonl(records: Iterable[dict[str, Any]], out: TextIO) -> int:
    """One record a line, as stored; the number written."""
    n = 0
    for r in records:
        out.write(json.dumps(r, ensure_ascii=False) + "\n")
        n += 1
    return n


def write_csv(records: Iterable[dict[str, Any]], out: TextIO) -> int:
    """A header and one row a record (lists joined by `|`); the number written."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    n = 0
    for r in records:
        row = []
        for path in CSV_COLUMNS.values():
            value = value_at(r, path)
            if isinstance(value, list):
                value = "|".join(str(v) for v in value)
            row.append("" if value is None else value)
        writer.writerow(row)
        n += 1
    return n


def group_table(by: list[str], groups: list[Group]) -> str:
    """Group counts as an aligned table, largest first."""
    rows = [(*(key.upper() for key in by), "COUNT")]
    rows += [(*(v or "-" for v in values), str(n)) for values, n in groups]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
