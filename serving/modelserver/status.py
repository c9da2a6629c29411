"""TF Serving's status codes: one typed error, its HTTP mapping and its gRPC mapping."""

from __future__ import annotations

# canonical code name -> HTTP status (TFS model_servers/http_server.cc ToHTTPStatusCode)
HTTP_STATUS: dict[str, int] = {
    "OK": 200,
    "CANCELLED": 499,
    "UNKNOWN": 500,
    "INVALID_ARGUMENT": 400,
    "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "PERMISSION_DENIED": 403,
    "RESOURCE_EXHAUSTED": 429,
    "FAILED_PRECONDITION": 400,
    "ABORTED": 409,
    "OUT_OF_RANGE": 400,
    "UNIMPLEMENTED": 501,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DATA_LOSS": 500,
    "UNAUTHENTICATED": 401,
}

# canonical code name -> numeric code (tensorflow/core/protobuf/error_codes.proto)
CODE_NUMBER: dict[str, int] = {
    "OK": 0,
    "CANCELLED": 1,
    "UNKNOWN": 2,
    "INVALID_ARGUMENT": 3,
    "DEADLINE_EXCEEDED": 4,
    "NOT_FOUND": 5,
    "ALREADY_EXISTS": 6,
    "PERMISSION_DENIED": 7,
    "RESOURCE_EXHAUSTED": 8,
    "FAILED_PRECONDITION": 9,
    "ABORTED": 10,
    "OUT_OF_RANGE": 11,
    "UNIMPLEMENTED": 12,
    "INTERNAL": 13,
    "UNAVAILABLE": 14,
    "DATA_LOSS": 15,
    "UNAUTHENTICATED": 16,
}


class ServingError(Exception):
    """An error with a TF Serving status code; the message is what clients see."""

    def __init__(self, code: str, message: str) -> None:
        if code not in HTTP_STATUS or code == "OK":
            raise ValueError(f"not an error code: {code}")
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        """The HTTP status TF Serving's REST server answers with."""
        return HTTP_STATUS[self.code]

    def grpc_code(self) -> object:
        """The matching `grpc.StatusCode`."""
        import grpc

        return getattr(grpc.StatusCode, self.code)


def invalid_argument(message: str) -> ServingError:
    """INVALID_ARGUMENT, TF Serving's answer to bad input."""
    return ServingError("INVALID_ARGUMENT", message)


def not_found(message: str) -> ServingError:
    """NOT_FOUND, for unknown models and versions."""
    return ServingError("NOT_FOUND", message)


def failed_precondition(message: str) -> ServingError:
    """FAILED_PRECONDITION, e.g. a label on an unavailable version."""
    return ServingError("FAILED_PRECONDITION", message)
