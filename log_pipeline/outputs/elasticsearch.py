"""Elasticsearch output: `_bulk` `create` actions with the record id as `_id`, into a data stream.

The shipper owns retries: the client's own are off (its status retries are immediate and a 429
would mark the node dead). Item handling follows Filebeat: 2xx ack; 409 on create is a duplicate,
acked; 429 and 5xx retried; 401/403/404 (a missing privilege, a missing data stream) are
configuration errors, retried with backoff while the shipper reports the output stalled; any other
4xx is permanent and dead-lettered with its reason.

Exactly once across rollovers. `create` with a fixed `_id` deduplicates only within the stream's
current backing index, so a record resent after a rollover would be stored twice. Whenever a
resend is possible, the output first asks the whole stream which of the batch's ids it holds
(`_refresh`, then an `ids` search over every backing index) and sends only the others: after an
ambiguous failure (the request may have been applied: a connection error, a timeout, a 5xx, an
answer it could not read) and from start-up (the checkpoint may lag the last acknowledged batch,
or be lost and replay every retained segment) until a batch comes back with none of its ids
already stored. Each request carries `require_data_stream=true`, so a missing data stream
(`es setup` not run) is a 404 instead of a plain index auto-created under the stream's name.

A request over Elasticsearch's `http.max_content_length` answers 413: the batch is split in halves
until it fits, and a record too large on its own is dead-lettered (`too_large`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from elastic_transport import ConnectionError as TransportConnectionError
from elastic_transport import ConnectionTimeout, SerializationError, TransportError
from elasticsearch import ApiError, Elasticsearch, NotFoundError, UnsupportedProductError

from log_pipeline.outputs import DUPLICATE, OK, Item, ItemResult, Outcome, RetryableError
from log_pipeline.settings import EsAuth
from tokenpulse.logging import get_logger

log = get_logger(__name__)
T = TypeVar("T")
LOOKUP_MAX = 10_000  # Elasticsearch's default index.max_result_window
# whole-request failures after which Elasticsearch may have applied the request
_UNAMBIGUOUS = frozenset({"rejected_429", "request_error", "config_error"})
CONFIG_STATUSES = frozenset({401, 403, 404})


def make_client(url: str, auth: EsAuth | None = None, timeout_s: float = 30.0) -> Elasticsearch:
    """A 9.x client with retries off (the caller retries with backoff)."""
    return Elasticsearch(
        url,
        **(auth or EsAuth()).client_kwargs(),  # type: ignore[arg-type]
        request_timeout=timeout_s,
        max_retries=0,
        retry_on_status=(),
        retry_on_timeout=False,
    )


def _classify_status(status: int) -> str:
    if status == 429:
        return "rejected_429"
    if status >= 500:
        return "server_error"
    if status in CONFIG_STATUSES:
        return "config_error"
    return "permanent"


def classify_item(item: Any) -> ItemResult:
    """One `_bulk` response item as an outcome."""
    if not isinstance(item, dict) or len(item) != 1:
        return ItemResult(Outcome.RETRY, f"malformed bulk item {item!r:.200}", "bad_response")
    info = next(iter(item.values()))
    status = info.get("status") if isinstance(info, dict) else None
    if not isinstance(status, int):
        return ItemResult(Outcome.RETRY, f"bulk item without status {item!r:.200}", "bad_response")
    if 200 <= status < 300:
        return OK
    error = info.get("error") or {}
    if isinstance(error, dict):
        reason = f"{status} {error.get('type', '?')}: {error.get('reason', '')}"
    else:
        reason = f"{status} {error}"
    if status == 409:
        return DUPLICATE
    failure = _classify_status(status)
    outcome = Outcome.PERMANENT if failure == "permanent" else Outcome.RETRY
    return ItemResult(outcome, reason, failure)


def _call(what: str, fn: Callable[[], T]) -> T:
    """One request; every whole-request failure as a RetryableError with its metric reason."""
    try:
        return fn()
    except UnsupportedProductError as exc:  # an ApiError too: a proxy or another product
        raise RetryableError(
            "bad_response", f"{what} answered by a non-Elasticsearch: {exc}"
        ) from exc
    except ApiError as exc:
        status = exc.meta.status if exc.meta is not None else 0
        failure = _classify_status(status)
        if failure == "permanent":
            failure = "request_error"  # a version mismatch, a bad request: fix it, keep the data
        raise RetryableError(failure, f"{what} answered {status}: {exc.message}") from exc
    except (TransportConnectionError, ConnectionTimeout) as exc:
        raise RetryableError("connection", f"{what} request failed: {exc}") from exc
    except (SerializationError, TransportError, ValueError) as exc:
        raise RetryableError("bad_response", f"{what} response unusable: {exc}") from exc


class _TooLarge(Exception):
    """The request was over Elasticsearch's http.max_content_length (413)."""


class ElasticsearchOutput:
    """Bulk-creates records in one data stream, never storing a record twice across rollovers."""

    name = "elasticsearch"

    def __init__(self, client: Elasticsearch, data_stream: str) -> None:
        self.client = client
        self.data_stream = data_stream
        self.verify = True  # look ids up before sending (see the module's doc)
        self.lookups = 0  # batches looked up
        self.found_stored = 0  # records a lookup found already stored (not resent)

    def body(self, items: list[Item]) -> bytes:
        """The NDJSON `_bulk` body: a create action and the record, per item."""
        parts = []
        for item in items:
            parts.append(b'{"create":{"_id":' + json.dumps(item.id).encode() + b"}}\n")
            parts.append(item.raw + b"\n")
        return b"".join(parts)

    def send(self, items: list[Item]) -> list[ItemResult]:
        """Deliver; whole-request failures raise RetryableError (after which ids are looked up
        before the resend, unless Elasticsearch surely applied nothing)."""
        try:
            stored = self.stored_ids([i.id for i in items]) if self.verify else set()
            if self.verify and not stored:
                self.verify = False  # nothing of this batch was there: later ones are new
            todo = [i for i in items if i.id not in stored]
            sent = iter(self._send(todo) if todo else [])
        except RetryableError as exc:
            if exc.failure not in _UNAMBIGUOUS:
                self.verify = True
            raise
        if stored:
            self.found_stored += len(stored & {i.id for i in items})
            log.info("records already stored; not resent", output=self.name,
                     records=len(items) - len(todo))  # fmt: skip
        return [DUPLICATE if i.id in stored else next(sent) for i in items]

    def stored_ids(self, ids: list[str]) -> set[str]:
        """Which of these ids any backing index of the stream holds (refreshed first: a search
        sees only refreshed documents)."""
        self.lookups += 1
        try:
            _call("refresh", lambda: self.client.indices.refresh(index=self.data_stream))
        except RetryableError as exc:
            if isinstance(exc.__cause__, NotFoundError):
                return set()  # no stream yet: nothing stored
            raise
        found: set[str] = set()
        for start in range(0, len(ids), LOOKUP_MAX):
            chunk = list(dict.fromkeys(ids[start : start + LOOKUP_MAX]))
            resp = _call("id lookup", lambda c=chunk: self.client.search(  # type: ignore[misc]
                index=self.data_stream, query={"ids": {"values": c}}, size=2 * len(c),
                source=False, track_total_hits=False,
            ))  # fmt: skip
            hits = resp.body.get("hits", {}).get("hits") if isinstance(resp.body, dict) else None
            if not isinstance(hits, list):
                raise RetryableError("bad_response", "id lookup answered without hits")
            found.update(str(h.get("_id")) for h in hits if isinstance(h, dict))
        return found

    def _send(self, items: list[Item]) -> list[ItemResult]:
        """Bulk-create, splitting the batch while Elasticsearch answers 413."""
        try:
            return self._bulk(items)
        except _TooLarge:
            if len(items) == 1:
                reason = ("413 request too large: the record alone is over Elasticsearch's "
                          f"http.max_content_length ({len(items[0].raw)} bytes)")  # fmt: skip
                log.error("record too large for Elasticsearch", output=self.name,
                          id=items[0].id, bytes=len(items[0].raw))  # fmt: skip
                return [ItemResult(Outcome.PERMANENT, reason, "too_large")]
            half = len(items) // 2
            log.warning("bulk request too large; splitting", output=self.name, records=len(items))
            return self._send(items[:half]) + self._send(items[half:])

    def _bulk(self, items: list[Item]) -> list[ItemResult]:
        body = self.body(items)

        def bulk() -> Any:
            try:
                # the NDJSON serializer forwards bytes as they are: no parse and re-dump
                return self.client.bulk(operations=body, index=self.data_stream,  # type: ignore[arg-type]
                                        require_data_stream=True)  # fmt: skip
            except ApiError as exc:
                if exc.meta is not None and exc.meta.status == 413:
                    raise _TooLarge(str(exc)) from exc
                raise

        resp = _call("bulk", bulk)
        body_out = resp.body
        items_out = body_out.get("items") if isinstance(body_out, dict) else None
        if not isinstance(items_out, list) or len(items_out) != len(items):
            raise RetryableError(
                "bad_response",
                f"bulk answered {len(items_out) if isinstance(items_out, list) else 'no'} items "
                f"for {len(items)} actions",
            )
        return [classify_item(i) for i in items_out]

    def close(self) -> None:
        """Close the client's connections."""
        self.client.close()
