"""Predict requests and responses of TF Serving's REST API, and the `{"b64": ...}` convention.

A request is row format `{"signature_name"?, "instances": [...]}` (answered with
`{"predictions": [...]}`) or columnar `{"signature_name"?, "inputs": {...}}` (answered with
`{"outputs": ...}`), never both. Binary strings travel as `{"b64": "<base64>"}`; TF Serving
always encodes outputs whose alias ends in `_bytes` that way and may do so for any string.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from tokenpulse.tfserving.errors import TfServingBadResponse

DEFAULT_SIGNATURE = "serving_default"


def predict_path(model: str, version: int | None = None, label: str | None = None) -> str:
    """`/v1/models/{model}[/versions/{v} | /labels/{l}]:predict` (`model` already URL-safe)."""
    if version is not None and label is not None:
        raise ValueError("give a version or a label, not both")
    where = f"/versions/{int(version)}" if version is not None else ""
    where = f"/labels/{label}" if label is not None else where
    return f"/v1/models/{model}{where}:predict"


def row_request(rows: list[dict[str, Any]], signature_name: str | None = None) -> dict[str, Any]:
    """A row-format predict body."""
    body: dict[str, Any] = {"instances": rows}
    if signature_name is not None:
        body = {"signature_name": signature_name, **body}
    return body


def b64(raw: bytes) -> dict[str, str]:
    """A binary string in TF Serving's JSON: `{"b64": "<base64>"}`."""
    return {"b64": base64.b64encode(raw).decode("ascii")}


def is_b64(value: object) -> bool:
    """Whether a JSON value is a `{"b64": "..."}` binary string."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str)


def decode_bytes(value: object) -> bytes:
    """A string output as bytes: plain JSON string (UTF-8) or `{"b64": ...}`."""
    if is_b64(value):
        try:
            return base64.b64decode(value["b64"], validate=True)  # type: ignore[index]
        except (binascii.Error, ValueError) as exc:
            raise TfServingBadResponse("string output is not valid base64") from exc
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    raise TfServingBadResponse('string output is neither a string nor {"b64": ...}')


def decode_text(value: object) -> str:
    """A string output as text (invalid UTF-8 replaced, as a reader of model output wants)."""
    if isinstance(value, str):
        return value
    return decode_bytes(value).decode("utf-8", "replace")


def parse_predictions(doc: object, rows: int) -> list[dict[str, Any]]:
    """The `predictions` of a row-format answer: one object per request row."""
    preds = doc.get("predictions") if isinstance(doc, dict) else None
    if not isinstance(preds, list) or len(preds) != rows:
        raise TfServingBadResponse(f"predict response has no predictions for every row ({rows})")
    if not all(isinstance(p, dict) for p in preds):
        raise TfServingBadResponse("prediction row is not an object")
    return preds
