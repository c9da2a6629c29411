"""TF Serving's REST API, the two calls the exporter makes: model status and predict.

Standard library only: the exporter is a light sidecar and never imports TensorFlow.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

# TF Serving's version states (ModelVersionStatus.State), in lifecycle order.
VERSION_STATES = ("START", "LOADING", "AVAILABLE", "UNLOADING", "END", "UNKNOWN")


class TfServingError(Exception):
    """A call to TF Serving failed."""


class TfServingUnreachable(TfServingError):
    """Nothing answered (connection refused, reset, timeout)."""


class TfServingHttpError(TfServingError):
    """TF Serving answered with an error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"http {status}: {message}")
        self.status = status
        self.message = message


class TfServingBadResponse(TfServingError):
    """TF Serving answered 200 with a body that is not what its API documents."""


@dataclass(frozen=True)
class VersionStatus:
    """One entry of `model_version_status`."""

    version: int
    state: str  # one of VERSION_STATES
    error_code: str
    error_message: str


class TfServingClient:
    """A small REST client bound to one TF Serving base URL (e.g. http://127.0.0.1:8501)."""

    def __init__(self, base_url: str, timeout_s: float = 2.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    def model_status(self, model: str) -> list[VersionStatus]:
        """`GET /v1/models/{model}`; an unknown model (404) has no versions."""
        try:
            doc = self._call("GET", f"/v1/models/{_quote(model)}", None, self.timeout_s)
        except TfServingHttpError as exc:
            if exc.status == 404:
                return []
            raise
        return parse_model_status(doc)

    def predict(
        self, model: str, version: int, rows: list[dict[str, Any]], timeout_s: float
    ) -> list[Any]:
        """`POST /v1/models/{model}/versions/{version}:predict` in row format; the predictions."""
        body = {"signature_name": "serving_default", "instances": rows}
        path = f"/v1/models/{_quote(model)}/versions/{int(version)}:predict"
        doc = self._call("POST", path, body, timeout_s)
        preds = doc.get("predictions") if isinstance(doc, dict) else None
        if not isinstance(preds, list) or len(preds) != len(rows):
            raise TfServingBadResponse("predict response has no predictions for every row")
        return preds

    def _call(self, method: str, path: str, body: object, timeout_s: float) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise TfServingHttpError(exc.code, _error_message(exc)) from exc
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TfServingUnreachable(f"{method} {path}: {reason}") from exc
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise TfServingBadResponse(f"{method} {path}: response is not json") from exc


def parse_model_status(doc: object) -> list[VersionStatus]:
    """Validate a model status document (versions come as strings, per TF Serving)."""
    entries = doc.get("model_version_status") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise TfServingBadResponse("status has no model_version_status list")
    out: list[VersionStatus] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise TfServingBadResponse("model_version_status entry is not an object")
        try:
            version = int(entry["version"])
        except (KeyError, TypeError, ValueError) as exc:
            raise TfServingBadResponse("model_version_status entry without a version") from exc
        state = entry.get("state")
        if not isinstance(state, str):
            raise TfServingBadResponse(f"version {version} has no state")
        raw_status = entry.get("status")
        status: dict[str, Any] = raw_status if isinstance(raw_status, dict) else {}
        out.append(
            VersionStatus(
                version=version,
                state=state if state in VERSION_STATES else "UNKNOWN",
                error_code=str(status.get("error_code", "OK") or "OK"),
                error_message=str(status.get("error_message", "") or ""),
            )
        )
    return out


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _error_message(exc: urllib.error.HTTPError) -> str:
    try:
        doc = json.loads(exc.read())
        return str(doc.get("error", "")) if isinstance(doc, dict) else ""
    except (ValueError, OSError):
        return str(exc.reason)
