"""Typed gateway errors, each with its HTTP status, and the two error shapes (native, OpenAI)."""

from __future__ import annotations

from typing import Any


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


class BadRequest(GatewayError):
    """Malformed JSON, invalid UTF-8, or a request the gateway will not run."""

    status = 400
    code = "invalid_request"
    openai_type = "invalid_request_error"


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
    """No API key, or an unknown one."""

    status = 401
    code = "invalid_api_key"
    openai_type = "authentication_error"


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


class DeadlineExceeded(GatewayError):
    """The request deadline passed before the upstream answered."""

    status = 504
    code = "deadline_exceeded"
    openai_type = "server_error"


def native_body(err: GatewayError, request_id: str) -> dict[str, Any]:
    """`/v1/generate` error shape."""
    body: dict[str, Any] = {
        "status": err.status,
        "code": err.code,
        "message": err.message,
        "request_id": request_id,
    }
    if err.param is not None:
        body["param"] = err.param
    return {"error": body}


def openai_body(err: GatewayError, request_id: str) -> dict[str, Any]:
    """`/v1/completions` error shape, as the `openai` SDK reads it."""
    return {
        "error": {
            "message": err.message,
            "type": err.openai_type,
            "param": err.param,
            "code": err.code,
        }
    }
