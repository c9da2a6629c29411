"""The TF Serving stand-in answers in TF Serving's REST shapes and misbehaves when told to."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from devtools.standins.tfserving import TfServingStandin
from tokenpulse.tfserving.signature import default_row


@pytest.fixture
def tfs() -> Iterator[TfServingStandin]:
    with TfServingStandin() as standin:
        yield standin


def _call(url: str, body: object | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _doc(url: str, body: object | None = None) -> tuple[int, Any]:
    status, text = _call(url, body)
    return status, json.loads(text)


def _predict(tfs: TfServingStandin, path: str, *prompts: str) -> tuple[int, Any]:
    rows = [default_row(p, 3) for p in prompts]
    return _doc(f"{tfs.url}/v1/models/{path}:predict", {"instances": rows})


def test_status_lists_versions_newest_first_with_their_errors(tfs):
    tfs.state.versions["gen"] = {1: "AVAILABLE", 2: "END"}
    tfs.state.errors[("gen", 2)] = ("NOT_FOUND", "gone")
    ok, gone = (
        {"error_code": "OK", "error_message": ""},
        {"error_code": "NOT_FOUND", "error_message": "gone"},
    )
    assert _doc(f"{tfs.url}/v1/models/gen") == (
        200,
        {
            "model_version_status": [
                {"version": "2", "state": "END", "status": gone},
                {"version": "1", "state": "AVAILABLE", "status": ok},
            ]
        },
    )
    assert _doc(f"{tfs.url}/v1/models/other") == (
        404,
        {"error": "Could not find any versions of model other"},
    )
    assert tfs.calls["status"] == 2


@pytest.mark.parametrize(
    ("mode", "status", "body"),
    [
        ("malformed", 200, "{not json"),
        ("wrong_shape", 200, '{"model_version_status": "nope"}'),
        ("error", 500, '{"error": "stand-in told to fail"}'),
    ],
)
def test_status_misbehaves_on_cue(tfs, mode, status, body):
    tfs.state.status_mode = mode
    assert _call(f"{tfs.url}/v1/models/gen") == (status, body)


def test_predict_by_version_label_or_latest(tfs):
    tfs.state.versions["gen"] = {1: "AVAILABLE", 2: "AVAILABLE", 3: "LOADING"}
    tfs.state.labels["gen"] = {"stable": 1}
    tfs.state.answers[("gen", 1)] = {"golden": ("answer", 0.25)}
    status, doc = _predict(tfs, "gen/labels/stable", "golden", "other")
    assert status == 200
    first, second = doc["predictions"]
    assert (first["text"], first["mean_nll"]) == ("answer", 0.25)
    assert (second["text"], second["mean_nll"]) == ("hello world (v1)", 1.5)
    assert first["output_tokens"] == 3 and first["prompt_tokens"] == len("golden")
    assert _predict(tfs, "gen", "x")[1]["predictions"][0]["text"] == "hello world (v2)"
    assert _predict(tfs, "gen/versions/3", "x") == (
        404,
        {"error": "Servable not found for request: Specific(gen, 3)"},
    )
    assert tfs.predict_calls() == 3 and tfs.calls["predict:v2"] == 1


def test_predict_rejects_what_the_signature_does_not_take(tfs):
    url = f"{tfs.url}/v1/models/gen:predict"
    assert _doc(url, {"instances": [{"prompt": "a", "nope": 1}]})[0] == 400
    assert _doc(url, {"instances": [{"max_new_tokens": 1}]})[0] == 400
    assert _doc(url, {"signature_name": "other", "instances": [{"prompt": "a"}]})[0] == 400
    assert _doc(url, {"inputs": {"prompt": ["a"]}})[0] == 400
    assert _call(url, "not an object") == (
        400,
        "{\"error\": \"Missing 'inputs' or 'instances' key, or an unknown signature\"}",
    )


def test_predict_fails_and_shapes_outputs_on_cue(tfs):
    tfs.state.output_tokens, tfs.state.finish_reason = 1, "stop"
    pred = _predict(tfs, "gen", "a")[1]["predictions"][0]
    assert (pred["output_tokens"], pred["finish_reason"]) == (1, "stop")
    tfs.state.fail_status = 503
    assert _predict(tfs, "gen", "a") == (503, {"error": "stand-in told to fail"})


def test_stop_refuses_connections_and_start_listens_on_the_same_port(tfs):
    port = tfs.port
    tfs.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{tfs.url}/v1/models/gen", timeout=2)
    tfs.start()
    assert tfs.port == port and _doc(f"{tfs.url}/v1/models/gen")[0] == 200
