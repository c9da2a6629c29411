"""Elasticsearch output: `_bulk` `create` actions with the record id as `_id`, into a data stream.

The shipper owns retries: the client's own are off (its status retries are immediate and a 429
would mark the node dead). Item handling follows Filebeat: 2xx ack; 409 on create is a duplicate,
acked; 429 and 5xx retried; any other 4xx is permanent and dead-lettered with its reason.
"""

from __future__ import annotations

import json
from typing import Any

from elastic_transport import ConnectionError as TransportConnectionError
from elastic_transport import ConnectionTimeout, SerializationError, TransportError
from elasticsearch import ApiError, Elasticsearch, UnsupportedProductError

from log_pipeline.outputs import DUPLICATE, OK, Item, ItemResult, Outcome, RetryableError
from log_pipeline.settings import EsAuth


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


class ElasticsearchOutput:
    """Bulk-creates records in one data stream."""

    name = "elasticsearch"

    def __init__(self, client: Elasticsearch, data_stream: str) -> None:
        self.client = client
        self.data_stream = data_stream

    def body(self, items: list[Item]) -> bytes:
        """The NDJSON `_bulk` body: a create action and the record, per item."""
        parts = []
        for item in items:
            parts.append(b'{"create":{"_id":' + json.dumps(item.id).encode() + b"}}\n")
            parts.append(item.raw + b"\n")
        return b"".join(parts)

    def send(self, items: list[Item]) -> list[ItemResult]:
        """One `_bulk` request; whole-request failures raise RetryableError."""
        try:
            # the NDJSON serializer forwards bytes as they are: no parse and re-dump of every record
            resp = self.client.bulk(operations=self.body(items), index=self.data_stream)  # type: ignore[arg-type]
        except UnsupportedProductError as exc:  # an ApiError too: a proxy or another product
            raise RetryableError(
                "bad_response", f"bulk answered by a non-Elasticsearch: {exc}"
            ) from exc
        except ApiError as exc:
            status = exc.meta.status if exc.meta is not None else 0
            failure = _classify_status(status)
            if failure == "permanent":
                failure = "request_error"  # auth, version mismatch: fix the config, keep the data
            raise RetryableError(failure, f"bulk answered {status}: {exc.message}") from exc
        except (TransportConnectionError, ConnectionTimeout) as exc:
            raise RetryableError("connection", f"bulk request failed: {exc}") from exc
        except (SerializationError, TransportError, ValueError) as exc:
            raise RetryableError("bad_response", f"bulk response unusable: {exc}") from exc
        body = resp.body
        items_out = body.get("items") if isinstance(body, dict) else None
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
