"""Predict request and response encoding, and the b64 convention."""

from __future__ import annotations

import pytest

from tokenpulse.tfserving.errors import TfServingBadResponse
from tokenpulse.tfserving.predict import (
    b64,
    decode_bytes,
    decode_text,
    is_b64,
    parse_predictions,
    predict_path,
    row_request,
)


def test_requests_and_paths() -> None:
    assert row_request([{"x": 1}], "serving_default") == {
        "signature_name": "serving_default",
        "instances": [{"x": 1}],
    }
    assert predict_path("gen", 3) == "/v1/models/gen/versions/3:predict"
    assert predict_path("gen", label="stable") == "/v1/models/gen/labels/stable:predict"
    with pytest.raises(ValueError):
        predict_path("gen", 1, "stable")


def test_b64_round_trip_and_text_decoding() -> None:
    raw = "héllo".encode()
    assert is_b64(b64(raw)) and decode_bytes(b64(raw)) == raw
    assert decode_text(b64(raw)) == "héllo"
    assert decode_text("plain") == "plain"
    assert decode_text(b64(b"\xff")) == "\ufffd"  # model output that is not UTF-8
    assert not is_b64({"b64": "AA==", "extra": 1})
    with pytest.raises(TfServingBadResponse):
        decode_text({"b64": "!!"})
    with pytest.raises(TfServingBadResponse):
        decode_text(3)


def test_predictions() -> None:
    assert parse_predictions({"predictions": [{"text": "a"}]}, 1) == [{"text": "a"}]
    bads: list[object] = [{"predictions": []}, {"outputs": {}}, {"predictions": ["x"]}, None]
    for bad in bads:
        with pytest.raises(TfServingBadResponse):
            parse_predictions(bad, 1)
