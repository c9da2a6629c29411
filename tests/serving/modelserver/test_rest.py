"""The REST API over loopback with a plain HTTP client: shapes, routing, errors, metrics."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from tests.support.modelserver import ModelServerProcess
from tokenpulse.tfserving.signature import OUTPUTS, default_row


def get(server: ModelServerProcess, path: str) -> httpx.Response:
    return httpx.get(server.rest_url + path, timeout=30)


def post(server: ModelServerProcess, path: str, body: Any) -> httpx.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(server.rest_url + path, content=data, timeout=60)


def counter(text: str, line_prefix: str) -> int:
    for line in text.splitlines():
        if line.startswith(line_prefix):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def test_status_lists_versions_newest_first_as_strings(server: ModelServerProcess) -> None:
    resp = get(server, "/v1/models/gen")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("application/json")
    doc = resp.json()
    assert doc == {
        "model_version_status": [
            {
                "version": v,
                "state": "AVAILABLE",
                "status": {"error_code": "OK", "error_message": ""},
            }
            for v in ("2", "1")
        ]
    }
    one = get(server, "/v1/models/gen/versions/1").json()["model_version_status"]
    assert [v["version"] for v in one] == ["1"]
    # a label segment is ignored by the status API
    assert get(server, "/v1/models/gen/labels/whatever").json() == doc


@pytest.mark.parametrize(
    ("method", "path", "status", "message"),
    [
        ("GET", "/v1/models/nope", 404, "Could not find any versions of model nope"),
        ("GET", "/v1/models/gen/versions/9", 404, "Could not find version 9 of model gen"),
        ("GET", "/v1/models", 400, "Missing model name in request."),
        (
            "GET",
            "/v1/models/gen/versions/1/labels/stable",
            400,
            "Malformed request: GET /v1/models/gen/versions/1/labels/stable",
        ),
        ("PUT", "/v1/models/gen", 400, "Malformed request: PUT /v1/models/gen"),
        ("POST", "/v1/models/gen:PREDICT", 400, "Malformed request: POST /v1/models/gen:PREDICT"),
        ("POST", "/v1/models/nope:predict", 404, "Servable not found for request: Latest(nope)"),
        (
            "POST",
            "/v1/models/gen/versions/9:predict",
            404,
            "Servable not found for request: Specific(gen, 9)",
        ),
        (
            "POST",
            "/v1/models/gen/labels/nope:predict",
            400,
            "Unrecognized servable version label: nope",
        ),
    ],
)
def test_errors_have_tf_serving_status_and_body(
    server: ModelServerProcess, method: str, path: str, status: int, message: str
) -> None:
    body = json.dumps({"instances": [default_row("x", 2)]}).encode()
    resp = httpx.request(method, server.rest_url + path, content=body, timeout=30)
    assert resp.status_code == status
    assert resp.json() == {"error": message}


def test_metadata_nests_signature_def_twice(server: ModelServerProcess) -> None:
    doc = get(server, "/v1/models/gen/labels/stable/metadata").json()
    assert doc["model_spec"] == {"name": "gen", "signature_name": "", "version": "1"}
    sig = doc["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert sig["inputs"]["max_new_tokens"]["dtype"] == "DT_INT32"
    assert sig["inputs"]["prompt"]["tensor_shape"]["dim"][0]["size"] == "-1"
    assert set(sig["outputs"]) == set(OUTPUTS)
    assert sig["method_name"] == "tensorflow/serving/predict"
    assert get(server, "/v1/models/gen/metadata").json()["model_spec"]["version"] == "2"


def test_predict_row_and_columnar_agree(server: ModelServerProcess) -> None:
    rows = [default_row("hello there", 6), default_row("abc", 3)]
    by_row = post(server, "/v1/models/gen/versions/1:predict", {"instances": rows})
    assert by_row.status_code == 200, by_row.text
    predictions = by_row.json()["predictions"]
    assert [set(p) for p in predictions] == [set(OUTPUTS)] * 2
    assert [p["output_tokens"] for p in predictions] == [
        min(6, p["output_tokens"]) for p in predictions
    ]
    columns = {k: [r[k] for r in rows] for k in rows[0]}
    by_col = post(server, "/v1/models/gen/labels/stable:predict", {"inputs": columns})
    assert by_col.status_code == 200, by_col.text
    outputs = by_col.json()["outputs"]
    assert outputs["text"] == [p["text"] for p in predictions]  # greedy: same text
    # whole floats keep their ".0", as TF Serving prints them
    assert re.search(r'"mean_nll": \[?-?\d+\.\d', by_col.text)


def test_bad_inputs_are_400_with_the_reason(server: ModelServerProcess) -> None:
    row = default_row("x", 2)
    row["seed"] = 1.0  # int64 needs a JSON integer
    resp = post(server, "/v1/models/gen:predict", {"instances": [row]})
    assert resp.status_code == 400
    assert "is not of expected type: int64" in resp.json()["error"]
    resp = post(server, "/v1/models/gen:predict", b"{not json")
    assert resp.status_code == 400 and resp.json()["error"].startswith("JSON Parse error")
    resp = post(
        server,
        "/v1/models/gen:predict",
        {"instances": [default_row("x")], "signature_name": "nope"},
    )
    assert resp.status_code == 400
    assert resp.json() == {"error": 'Serving signature name: "nope" not found in signature def'}


def test_requests_are_recorded_like_tf_serving(server: ModelServerProcess) -> None:
    before = server.metrics_text()
    assert (
        post(server, "/v1/models/gen:predict", {"instances": [default_row("m", 2)]}).status_code
        == 200
    )
    assert get(server, "/v1/models/nope").status_code == 404
    assert get(server, "/v1/models/gen").status_code == 200
    after = server.metrics_text()

    def delta(prefix: str) -> int:
        return counter(after, prefix) - counter(before, prefix)

    rc = ":tensorflow:serving:request_count"
    assert delta(f'{rc}{{model_name="gen",status="OK"}}') == 2
    assert delta(f'{rc}{{model_name="__unknown__",status="NOT_FOUND"}}') == 1
    rl = ":tensorflow:serving:request_latency_count"
    assert delta(f'{rl}{{model_name="gen",API="predict",entrypoint="REST"}}') == 1
    assert delta(f'{rl}{{model_name="gen",API="",entrypoint="REST"}}') == 1
    assert delta(f'{rl}{{model_name="__unknown__",API="",entrypoint="REST"}}') == 0  # no latency
    rt = ':tensorflow:serving:runtime_latency_count{model_name="gen",API="Predict",runtime="TF1"}'
    assert delta(rt) == 1


def test_metrics_page_is_plain_text_and_other_paths_are_not_it(server: ModelServerProcess) -> None:
    resp = httpx.get(server.metrics_url, timeout=10)
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "text/plain"
    assert get(server, "/monitoring/prometheus/other").status_code != 200


def test_unknown_model_names_do_not_grow_the_metrics_page(server: ModelServerProcess) -> None:
    row = json.dumps({"instances": [default_row("x", 1)]}).encode()
    with httpx.Client(base_url=server.rest_url, timeout=30) as client:
        for i in range(1_000):
            path = f"/v1/models/bogus-{i}" if i % 2 else f"/v1/models/bogus-{i}:predict"
            resp = client.request("GET" if i % 2 else "POST", path, content=row)
            assert resp.status_code == 404
    text = server.metrics_text()
    assert "bogus" not in text
    series = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(series) < 1_000
    assert counter(text, ':tensorflow:serving:request_count{model_name="__unknown__",') >= 1_000


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/models/gen:predict", b'{"instances": [{"prompt": "\\ud800"}]}'),
        ("/v1/models/gen:predict", b'{"signature_name": "\\ud800", "instances": [1]}'),
        ("/v1/models/gen:predict", b'{"inputs": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"),
        ("/v1/models/gen/versions/9223372036854775808:predict", b'{"instances": [1]}'),
        ("/v1/models/gen/versions/" + "9" * 5_000 + ":predict", b'{"instances": [1]}'),
    ],
)
def test_hostile_input_is_400_with_a_json_error(
    server: ModelServerProcess, path: str, body: bytes
) -> None:
    resp = post(server, path, body)
    assert resp.status_code == 400, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    assert resp.json()["error"]


def test_version_beyond_int64_is_400_like_tf_serving(server: ModelServerProcess) -> None:
    resp = get(server, "/v1/models/gen/versions/9223372036854775808")
    assert resp.status_code == 400
    assert resp.json() == {"error": "Failed to convert version: 9223372036854775808 to numeric."}


def test_body_over_the_limit_is_413_before_it_is_read(server: ModelServerProcess) -> None:
    big = b'{"instances": ["' + b"x" * (16 * 1024 * 1024) + b'"]}'
    resp = post(server, "/v1/models/gen:predict", big)
    assert resp.status_code == 413
    assert "exceeds the limit of 16777216 bytes" in resp.json()["error"]
    assert post(server, "/v1/models/gen:predict", {"instances": [default_row("a", 1)]}).is_success


def test_columnar_predict_with_an_empty_batch_is_200_and_empty(server: ModelServerProcess) -> None:
    columns = {k: [] for k in default_row("x", 1)}
    resp = post(server, "/v1/models/gen:predict", {"inputs": columns})
    assert resp.status_code == 200, resp.text
    outputs = resp.json()["outputs"]
    assert set(outputs) == set(OUTPUTS)
    assert all(value == [] for value in outputs.values())


def test_zero_new_tokens_is_an_empty_generation(server: ModelServerProcess) -> None:
    resp = post(server, "/v1/models/gen:predict", {"instances": [default_row("abc", 0)]})
    assert resp.status_code == 200, resp.text
    assert resp.json()["predictions"][0]["output_tokens"] == 0
