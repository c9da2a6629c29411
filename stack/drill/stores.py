"""What the sample stores of a running stack hold, for a drill's zero-loss check.

The embedded store (RUN_DIR/samples.db, read-only) says which samples the shipper stored since a
row; Elasticsearch (the stack's ES_URL itself, never the drill's fault proxy in front of it) says
how many copies of each it holds across every backing index of the samples' data stream; the
shipper's and the gateway's /metrics say whether anything was dropped, skipped or dead-lettered.
Standard library only, as the rest of the drill.
"""

from __future__ import annotations

import collections
import json
import os
import sqlite3
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from log_pipeline.assets import DEFAULT_STREAM
from stack.drill.target import DrillError, Target

SQLITE_FILE = "samples.db"  # where `up` points the shipper's SQLite output (stack/components.py)
LOOKUP_CHUNK = 1000  # ids per search: twice this stays inside ES's 10,000-result window
# what the shipper cannot deliver, per component: a rise in any of them is a sample lost
LOSS_COUNTERS = {
    "shipper_port": (
        "tokenpulse_shipper_records_dead_lettered_total",
        "tokenpulse_shipper_segments_skipped_total",
    ),
    "gateway_port": (
        "tokenpulse_spool_records_dropped_total",
        "tokenpulse_gateway_samples_dropped_total",
    ),
}


@dataclass(frozen=True)
class Stored:
    """One sample in the embedded store."""

    rowid: int
    id: str
    at: float  # its @timestamp, unix seconds


def _unix(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def sqlite_since(target: Target, after_rowid: int) -> list[Stored]:
    """The samples the embedded store took after row `after_rowid`, in order (0: all)."""
    path = target.state.path(SQLITE_FILE)
    if not path.exists():
        return []  # the shipper creates it with its first batch
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10.0)
        try:
            rows = conn.execute(
                "SELECT rowid, id, ts FROM samples WHERE rowid > ? ORDER BY rowid", (after_rowid,)
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise DrillError(f"the sample store {path} cannot be read: {exc}") from exc
    return [Stored(r, i, _unix(ts)) for r, i, ts in rows]


def sqlite_last_row(target: Target) -> int:
    """The newest row of the embedded store (0 when empty)."""
    rows = sqlite_since(target, 0)
    return rows[-1].rowid if rows else 0


def es_api_key() -> str:
    """The API key `up` gave the shipper (the same environment variables), or ""."""
    return os.environ.get("TOKENPULSE_UP_ES_API_KEY") or os.environ.get("ES_API_KEY", "")


class Elasticsearch:
    """The stack's Elasticsearch, straight (ES_URL as `up` was given it)."""

    def __init__(self, target: Target, timeout_s: float = 30.0) -> None:
        if not target.state.config.es_url:
            raise DrillError(
                "the stack ships samples to SQLite only: start up with --es-url (or ES_URL) "
                "and --es-fault-proxy-port to drill Elasticsearch"
            )
        self.url = target.state.config.es_url
        self.stream = os.environ.get("TOKENPULSE_SHIPPER_ES_DATA_STREAM", DEFAULT_STREAM)
        self.timeout_s = timeout_s
        self.key = es_api_key()

    def call(self, path: str, body: Any = None, method: str = "POST") -> Any:
        """One request; its JSON body. DrillError when unreachable or not 2xx."""
        req = urllib.request.Request(
            f"{self.url}{path}", None if body is None else json.dumps(body).encode(), method=method
        )
        req.add_header("Content-Type", "application/json")
        if self.key:
            req.add_header("Authorization", f"ApiKey {self.key}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            said = exc.read()[:200].decode(errors="replace")
            raise DrillError(f"elasticsearch {path} answered {exc.code}: {said}") from exc
        except (OSError, ValueError) as exc:
            raise DrillError(f"elasticsearch {self.url} unreachable: {exc}") from exc

    def copies(self, ids: list[str]) -> collections.Counter[str]:
        """How many documents of the data stream carry each of these ids (every backing index:
        a resend after a rollover would be a second copy)."""
        self.call(f"/{self.stream}/_refresh")  # a search sees refreshed documents only
        found: collections.Counter[str] = collections.Counter()
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), LOOKUP_CHUNK):
            chunk = unique[start : start + LOOKUP_CHUNK]
            body = {"query": {"ids": {"values": chunk}}, "size": 2 * len(chunk), "_source": False}
            doc = self.call(f"/{self.stream}/_search", body)
            hits = doc.get("hits", {}).get("hits") if isinstance(doc, dict) else None
            if not isinstance(hits, list):
                raise DrillError(f"elasticsearch answered a search without hits: {doc!r:.200}")
            found.update(str(h.get("_id")) for h in hits if isinstance(h, dict))
        return found


def metric_sum(text: str, name: str) -> float:
    """The sum of one metric's samples (every label set) in a text exposition."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def loss_counters(target: Target) -> dict[str, float]:
    """Every loss counter (see LOSS_COUNTERS), read from its component's /metrics now."""
    out: dict[str, float] = {}
    for port_field, names in LOSS_COUNTERS.items():
        url = target.state.url(port_field, "/metrics")
        try:
            with urllib.request.urlopen(url, timeout=target.timeout_s) as resp:
                text = resp.read().decode()
        except OSError as exc:
            raise DrillError(f"{url} unreachable: {exc}") from exc
        out.update({name: metric_sum(text, name) for name in names})
    return out
