"""Where the shipper delivers records: the contract every output follows.

`send` answers one `ItemResult` per record, in order, or raises `RetryableError` when the whole
request failed (the shipper retries it with backoff for as long as it takes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol


class Outcome(StrEnum):
    """What became of one record."""

    OK = "ok"
    DUPLICATE = "duplicate"  # the store already held this id: delivered
    RETRY = "retry"  # try again later (per-item 429, 5xx)
    PERMANENT = "permanent"  # never retry: dead-letter with the reason


@dataclass(frozen=True, slots=True)
class ItemResult:
    """The outcome of one record and, when it failed, why."""

    outcome: Outcome
    reason: str = ""  # free text for the log and the dead-letter file
    failure: str = ""  # closed set (metrics.FAIL_REASONS) for the metric label


OK = ItemResult(Outcome.OK)
DUPLICATE = ItemResult(Outcome.DUPLICATE)


class RetryableError(Exception):
    """The whole request failed in a way worth retrying; `failure` is the metric reason."""

    def __init__(self, failure: str, message: str) -> None:
        super().__init__(message)
        self.failure = failure


class Item:
    """One record to deliver: its id, its @timestamp, the raw JSON line, and the parsed record on
    first use (the Elasticsearch path never needs it: the line goes out as it is)."""

    __slots__ = ("_doc", "id", "raw", "timestamp")

    def __init__(
        self, id: str, doc: dict[str, Any] | None, raw: bytes, timestamp: str = ""
    ) -> None:
        self.id = id
        self.raw = raw
        self._doc = doc
        self.timestamp = timestamp or (str(doc.get("@timestamp", "")) if doc else "")

    @property
    def doc(self) -> dict[str, Any]:
        """The parsed record; ValueError when the line is not a JSON object."""
        if self._doc is None:
            doc = json.loads(self.raw)
            if not isinstance(doc, dict):
                raise ValueError("record is not a JSON object")
            self._doc = doc
        return self._doc


class Output(Protocol):
    """A store the shipper feeds."""

    name: str

    def send(self, items: list[Item]) -> list[ItemResult]:
        """Deliver; one result per item, in order."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
