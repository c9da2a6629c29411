"""Typed gateway errors, each with its HTTP status, and the two error shapes (native, OpenAI)."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict


def _drop_null_param(schema: dict[str, Any]) -> None:
    # `param` is left out rather than sent as null, so the schema says string
    schema["properties"]["param"] = {"type": "string"}


class GatewayError(Exception):
    """A request the gateway answers with an error; never a stack trace."""

    status = 500
    code = "internal_error"
    openai_type = "server_error"

    def __init__(
        self, message: str, *, param: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        """Extra response headers this error carries."""
        return {}

    def response_headers(self) -> dict[str, str]:
        """`headers()` plus `Retry-After` on every 429 and 503 (1 s unless the error knows
        better), so a client's retry logic always has a delay to wait."""
        headers = self.headers()
        if self.status in (429, 503) or self.retry_after is not None:
            seconds = 1.0 if self.retry_after is None else self.retry_after
            headers["Retry-After"] = str(max(1, math.ceil(seconds)))
        return headers


class BadRequest(GatewayError):
    """Malformed JSON, invalid UTF-8, or a request the gateway will not run."""

    status = 400
    code = "invalid_request"
    openai_type = "invalid_request_error"


class ContextLengthExceeded(BadRequest):
    """Prompt and requested completion do not fit the model's window (vLLM's 400)."""

    code = "context_length_exceeded"


class InvalidParameter(GatewayError):
    """A field with a wrong type or out of range."""

    status = 422
    code = "invalid_parameter"
    openai_type = "invalid_request_error"


class PayloadTooLarge(GatewayError):
    """Body or prompt over the configured size limit."""

    status = 413
    code = "payload_too_large"
    openai_type = "invalid_request_error"


class Unauthenticated(GatewayError):
    """No API key, or an unknown one; the answer names the scheme (RFC 6750)."""

    status = 401
    code = "invalid_api_key"
    openai_type = "authentication_error"

    def headers(self) -> dict[str, str]:
        """The challenge a 401 must carry (RFC 9110 §11.6.1)."""
        return {"WWW-Authenticate": "Bearer"}


class Forbidden(GatewayError):
    """A known key asking for something it is not allowed."""

    status = 403
    code = "model_not_allowed"
    openai_type = "permission_error"


class NotFound(GatewayError):
    """Unknown model or version label."""

    status = 404
    code = "not_found"
    openai_type = "invalid_request_error"


class ModelNotFound(NotFound):
    """A model this gateway does not serve (OpenAI's code for it)."""

    code = "model_not_found"


class RateLimited(GatewayError):
    """The key spent its request or token budget; retry after `retry_after` seconds."""

    status = 429
    code = "rate_limit_exceeded"
    openai_type = "rate_limit_error"


class Overloaded(GatewayError):
    """Load shed: no concurrency slot within the bounded wait."""

    status = 503
    code = "overloaded"
    openai_type = "server_error"


class ShuttingDown(GatewayError):
    """The gateway is draining before it exits (SIGTERM): another replica takes the request.
    The connection is closed after the answer, so a client's next request goes elsewhere."""

    status = 503
    code = "shutting_down"
    openai_type = "server_error"

    def headers(self) -> dict[str, str]:
        """`Connection: close`: a keep-alive connection to a draining gateway is of no use."""
        return {"Connection": "close"}


class CircuitOpen(GatewayError):
    """The upstream breaker is open: failing fast without calling the upstream."""

    status = 503
    code = "circuit_open"
    openai_type = "server_error"


class UpstreamUnavailable(GatewayError):
    """The upstream could not be reached or has no AVAILABLE version."""

    status = 503
    code = "upstream_unavailable"
    openai_type = "server_error"


class UpstreamFailed(GatewayError):
    """The upstream answered with an error or a response the gateway cannot read."""

    status = 502
    code = "upstream_error"
    openai_type = "server_error"


class UpstreamRejected(UpstreamFailed):
    """The upstream refused a request the gateway had validated (TF Serving's 4xx, e.g.
    FAILED_PRECONDITION or INVALID_ARGUMENT as 400): the server's fault, not the client's."""

    code = "upstream_rejected"


class StreamingUnsupported(GatewayError):
    """The routed version has no `continue` signature (exported before streaming existed): a
    400, since a 5xx would make the openai SDK retry what cannot succeed."""

    status = 400
    code = "streaming_unsupported"
    openai_type = "invalid_request_error"


class DeadlineExceeded(GatewayError):
    """The request deadline passed before the upstream answered."""

    status = 504
    code = "deadline_exceeded"
    openai_type = "server_error"


class NativeErrorDetail(BaseModel):
    """What went wrong, in `/v1/generate`'s error shape."""

    model_config = ConfigDict(json_schema_extra=_drop_null_param)

    status: int
    code: str
    message: str
    request_id: str
    param: str | None = None


class NativeError(BaseModel):
    """`/v1/generate` error body."""

    error: NativeErrorDetail


class OpenAIErrorDetail(BaseModel):
    """What went wrong, as the `openai` SDK reads it."""

    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIError(BaseModel):
    """`/v1/completions` error body."""

    error: OpenAIErrorDetail


def native_body(err: GatewayError, request_id: str) -> NativeError:
    """`/v1/generate` error shape (`param` only when one is to blame)."""
    return NativeError(
        error=NativeErrorDetail(
            status=err.status,
            code=err.code,
            message=err.message,
            request_id=request_id,
            param=err.param,
        )
    )


def openai_body(err: GatewayError, request_id: str) -> OpenAIError:
    """`/v1/completions` error shape, as the `openai` SDK reads it."""
    del request_id  # the SDK has no field for it; the X-Request-ID header carries it
    return OpenAIError(
        error=OpenAIErrorDetail(
            message=err.message, type=err.openai_type, param=err.param, code=err.code
        )
    )


def connection_error_body(status: int, message: str) -> bytes:
    """The native error shape for a connection refused before any request was read."""
    code = {408: "request_timeout", 503: "too_many_connections"}.get(status, "connection_refused")
    detail = NativeErrorDetail(status=status, code=code, message=message, request_id="")
    return dump(NativeError(error=detail))


def dump(body: BaseModel) -> bytes:
    """A response body as JSON bytes; a native error's `param` only appears when set."""
    exclude = (
        {"error": {"param"}} if isinstance(body, NativeError) and body.error.param is None else None
    )
    return body.model_dump_json(exclude=exclude).encode()
