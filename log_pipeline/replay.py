"""`tokenpulse samples replay`: send an output's dead letters back to it, once the cause is fixed.

tokenpulse samples replay --output elasticsearch --spool-dir run/spool --es-url http://...

It takes the shipper's settings (flags and TOKENPULSE_SHIPPER_* variables), so it reaches the
same store with the same sign-in. Under the dead-letter lock it closes the current file (the
running shipper starts a new one), then sends the closed files' records in batches through the
output the shipper uses (Elasticsearch looks the ids up first, so nothing is stored twice).
Delivered records leave the files; a record rejected for good again goes back to the dead
letters with its new reason; a configuration error or an output that stays unreachable stops the
replay with the rest kept. Exit 0 when nothing is left, 1 when some records remain dead.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from log_pipeline import deadletter
from log_pipeline.outputs import Item, Outcome, Output, RetryableError
from log_pipeline.settings import ShipperSettings
from tokenpulse.atomic import atomic_write
from tokenpulse.logging import get_logger

log = get_logger(__name__)
_ATTEMPTS = 5


class ReplayError(Exception):
    """The replay stopped; what was not sent stays in the dead letters."""


@dataclass
class ReplayResult:
    """What became of the dead letters."""

    replayed: int = 0  # stored now, or found already stored
    dead_again: int = 0  # rejected for good again: back in the dead letters
    kept: int = 0  # not sent (the replay stopped)


def _item(entry: dict[str, Any]) -> Item:
    record = entry.get("record")
    if isinstance(record, dict):
        raw = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
        return Item(str(entry["id"]), record, raw, str(record.get("@timestamp", "")))
    return Item(str(entry["id"]), None, str(record).encode())


def _send(output: Output, items: list[Item], backoff_s: float) -> list[tuple[Item, Outcome, str]]:
    """Deliver until each item is acked or rejected for good; ReplayError when it cannot."""
    pending, attempt = items, 0
    done: list[tuple[Item, Outcome, str]] = []
    while pending:
        try:
            results = output.send(pending)
        except RetryableError as exc:
            if exc.failure in ("config_error", "request_error") or attempt + 1 >= _ATTEMPTS:
                raise ReplayError(f"{output.name}: {exc}") from exc
            attempt += 1
            time.sleep(backoff_s * 2**attempt)
            continue
        retry = []
        for item, res in zip(pending, results, strict=True):
            if res.outcome is Outcome.RETRY:
                if res.failure == "config_error" or attempt + 1 >= _ATTEMPTS:
                    raise ReplayError(f"{output.name}: {res.reason}")
                retry.append(item)
            else:
                done.append((item, res.outcome, res.reason))
        pending = retry
        if pending:
            attempt += 1
            time.sleep(backoff_s * 2**attempt)
    return done


def replay(settings: ShipperSettings, output: Output, dry_run: bool = False) -> ReplayResult:
    """Send `output`'s dead letters back to it (see the module's doc)."""
    state, name = settings.state(), output.name
    result = ReplayResult()
    with deadletter.locked(state, name):
        if not dry_run:
            deadletter.rotate(state, name)
        files = deadletter.rotated_files(state, name) + (
            [deadletter.deadletter_path(state, name)] if dry_run else []
        )
    for path in files:
        entries = deadletter.read_entries(path)
        if dry_run:
            result.kept += len(entries)
            continue
        remaining, chunk = list(entries), []
        try:
            while remaining:
                n = settings.batch_records
                chunk, remaining = remaining[:n], remaining[n:]
                outcomes = _send(output, [_item(e) for e in chunk], settings.backoff_initial_s)
                dead = [(item, reason) for item, outcome, reason in outcomes
                        if outcome is Outcome.PERMANENT]  # fmt: skip
                result.replayed += len(outcomes) - len(dead)
                result.dead_again += len(dead)
                if dead:
                    with deadletter.locked(state, name):
                        deadletter.append(deadletter.deadletter_path(state, name),
                                          deadletter.encode(dead))  # fmt: skip
        except ReplayError:
            result.kept += len(chunk) + len(remaining)
            _keep(path, chunk + remaining)
            raise
        path.unlink()
    return result


def _keep(path: Path, entries: list[dict[str, Any]]) -> None:
    """Rewrite a file with the entries not sent (atomically)."""
    data = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries)
    atomic_write(path, data, 0o600, durable=True)
