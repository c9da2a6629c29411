"""Server-sent events as the OpenAI API streams them: `data: <json>` events, then `data: [DONE]`.

A stream that fails after its first byte cannot change its status any more: it sends one
`data: {"error": {...}}` event in the OpenAI error shape (the `openai` SDK raises it as an
`APIError`), then `data: [DONE]`.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from serving.gateway.errors import GatewayError, openai_body

CONTENT_TYPE = "text/event-stream"
HEADERS = {
    "Content-Type": f"{CONTENT_TYPE}; charset=utf-8",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",  # a proxy in front must not hold the chunks back
}
DONE = b"data: [DONE]\n\n"
# (prompt tokens, tokens generated) of a stream so far: the usage of vLLM's continuous_usage_stats
Progress = Callable[[], tuple[int, int]]


def event(body: BaseModel) -> bytes:
    """One `data:` event carrying `body` as JSON (JSON has no raw newlines: one line)."""
    return b"data: " + body.model_dump_json().encode() + b"\n\n"


def error_event(err: GatewayError, request_id: str) -> bytes:
    """The event that ends a stream failed after its first byte."""
    return event(openai_body(err, request_id))
