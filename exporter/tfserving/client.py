"""TF Serving's REST API over urllib: the two calls the exporter makes, model status and predict.

Standard library transport: the exporter is a light sidecar and never imports TensorFlow.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from tokenpulse.tfserving.errors import (
    TfServingBadResponse,
    TfServingHttpError,
    TfServingTimeout,
    TfServingUnreachable,
    error_message,
)
from tokenpulse.tfserving.predict import parse_predictions, predict_path, row_request
from tokenpulse.tfserving.signature import SIGNATURE_NAME
from tokenpulse.tfserving.status import VersionStatus, parse_model_status, status_path


class TfServingClient:
    """A small REST client bound to one TF Serving base URL (e.g. http://127.0.0.1:8501)."""

    def __init__(self, base_url: str, timeout_s: float = 2.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    def model_status(self, model: str) -> list[VersionStatus]:
        """`GET /v1/models/{model}`; an unknown model (404) has no versions."""
        try:
            doc = self._call("GET", status_path(_quote(model)), None, self.timeout_s)
        except TfServingHttpError as exc:
            if exc.status == 404:
                return []
            raise
        return parse_model_status(doc)

    def predict(
        self, model: str, version: int, rows: list[dict[str, Any]], timeout_s: float
    ) -> list[dict[str, Any]]:
        """Row-format predict on one exact version; one prediction object per row."""
        body = row_request(rows, SIGNATURE_NAME)
        doc = self._call("POST", predict_path(_quote(model), version), body, timeout_s)
        return parse_predictions(doc, len(rows))

    def _call(self, method: str, path: str, body: object, timeout_s: float) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise TfServingHttpError(exc.code, _http_error_message(exc)) from exc
        except TimeoutError as exc:
            raise TfServingTimeout(f"{method} {path}: no answer within {timeout_s:.3g}s") from exc
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TfServingUnreachable(f"{method} {path}: {reason}") from exc
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise TfServingBadResponse(f"{method} {path}: response is not json") from exc


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _http_error_message(exc: urllib.error.HTTPError) -> str:
    try:
        return error_message(exc.read()) or str(exc.reason)
    except OSError:
        return str(exc.reason)
