"""One error hierarchy for talking to TF Serving: config files and REST calls.

Every REST client keeps its own transport (urllib in the exporter, aiohttp in the gateway) and
raises these, so callers handle "unreachable", "answered an error" and "answered nonsense" the same
way everywhere. TF Serving's REST errors are JSON bodies `{"error": "<message>"}`.
"""

from __future__ import annotations

import json


class ConfigError(ValueError):
    """A TF Serving text config that cannot be read, parsed or accepted.

    Rendered like protobuf's own errors, `[path:]line:column : message`, when the place is known.
    """

    def __init__(
        self,
        message: str,
        line: int | None = None,
        column: int | None = None,
        path: str | None = None,
    ) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.path = path
        where = f"{line}:{column} : " if line is not None else ""
        if path is not None:
            where = f"{path}:{where}" if where else f"{path}: "
        super().__init__(f"{where}{message}")

    def in_file(self, path: object) -> ConfigError:
        """The same error, naming the file it came from."""
        return ConfigError(self.message, self.line, self.column, str(path))


class TfServingError(Exception):
    """A call to TF Serving failed; `status` is the HTTP status when one came back."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class TfServingUnreachable(TfServingError):
    """Nothing answered: connection refused or reset, the model server is down."""


class TfServingTimeout(TfServingError):
    """No answer within the caller's deadline."""


class TfServingHttpError(TfServingError):
    """TF Serving answered with an error status and (usually) its `{"error": ...}` message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message, status)
        self.status: int = status

    def __str__(self) -> str:
        return f"http {self.status}: {self.message}"


class TfServingBadResponse(TfServingError):
    """TF Serving answered with a body that is not what its REST API documents."""


def error_message(body: bytes | str) -> str:
    """The `error` field of an error body, or '' when the body is not TF Serving's error JSON."""
    try:
        doc = json.loads(body)
    except ValueError:
        return ""
    message = doc.get("error") if isinstance(doc, dict) else None
    return message if isinstance(message, str) else ""


def error_body(message: str) -> dict[str, str]:
    """The JSON body TF Serving answers an error with."""
    return {"error": message}
