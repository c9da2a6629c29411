"""Helpers for shipper tests: run a shipper on a thread, wait for a condition, read the stores."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from log_pipeline.outputs import Output
from log_pipeline.settings import ShipperSettings
from log_pipeline.shipper import Shipper
from log_pipeline.spool import list_segments
from stack import launch

STREAM = "genai-samples-default"
PATTERN = "genai-samples-*"  # the stand-in's data-stream template, as `es setup` installs


def shipper_settings(spool: Path, **overrides: Any) -> ShipperSettings:
    """Fast polling and short backoff so tests finish quickly."""
    base: dict[str, Any] = {
        "spool_dir": spool, "sqlite_path": spool.parent / "samples.db", "poll_interval_s": 0.02,
        "backoff_initial_s": 0.01, "backoff_max_s": 0.2, "es_timeout_s": 5.0, "metrics_port": 0,
        "batch_records": 50,
        "sqlite_retention_days": 0,  # test records may carry fixed, old timestamps
    }  # fmt: skip
    return ShipperSettings.model_validate({**base, **overrides})


@contextmanager
def shipping(settings: ShipperSettings, outputs: list[Output] | None = None) -> Iterator[Shipper]:
    """A shipper running on a thread for the block; stopped (and joined) after, even on failure."""
    shipper = Shipper(settings, outputs)
    thread = threading.Thread(target=shipper.run, daemon=True)
    thread.start()
    try:
        yield shipper
    finally:
        shipper.stop.set()
        thread.join(30)


def wait_until(cond: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Poll until `cond()` holds (a deadlock guard, not a performance assertion)."""
    launch.wait_until(cond, timeout_s, what, every_s=0.02)


def sqlite_ids(path: Path) -> list[str]:
    """Every record id in the embedded store (with repeats, if there were any)."""
    if not path.exists():
        return []
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("SELECT id FROM samples")]
    except sqlite3.OperationalError:  # the shipper is creating the schema right now
        return []
    finally:
        conn.close()


def shipped(shipper: Shipper, output: str) -> float:
    """Records acknowledged by one output so far."""
    value = shipper.registry.get_sample_value(
        "tokenpulse_shipper_records_shipped_total", {"output": output}
    )
    return value or 0.0


def metric(shipper: Shipper, name: str, **labels: str) -> float:
    """One sample of the shipper's registry (0 when absent)."""
    return shipper.registry.get_sample_value(name, labels) or 0.0


def sqlite_docs(path: Path) -> list[dict[str, Any]]:
    """Every record in the embedded store, parsed (with repeats, if there were any)."""
    if not path.exists():
        return []
    conn = sqlite3.connect(path)
    try:
        return [json.loads(row[0]) for row in conn.execute("SELECT doc FROM samples")]
    except sqlite3.OperationalError:  # the shipper is creating the schema right now
        return []
    finally:
        conn.close()


def request_ids(docs: Iterable[dict[str, Any]]) -> list[str]:
    """The client's request id of each record, sorted (repeats kept)."""
    return sorted(str(d["genai_sample"]["request_id"]) for d in docs)


def spool_ids(spool: Path) -> dict[str, str]:
    """Record id -> request id of every record now in the spool (ids are random per sample)."""
    out: dict[str, str] = {}
    for path in list_segments(spool):
        for line in path.read_bytes().splitlines():
            try:
                doc = json.loads(line)
                out[doc["event"]["id"]] = doc["genai_sample"]["request_id"]
            except (ValueError, KeyError, TypeError):  # torn or planted garbage
                continue
    return out


def root_settings(root: Path, **overrides: Any) -> ShipperSettings:
    """As shipper_settings, following every writer directory under a spool root."""
    base = shipper_settings(root, **overrides).model_dump(exclude={"spool_dir"})
    return ShipperSettings.model_validate({**base, "spool_root": root, **overrides})
