"""REST JSON <-> tensors with TF Serving's encoding rules (json_tensor.cc)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from serving.modelserver.status import ServingError
from serving.modelserver.tensors import (
    error_json,
    format_float,
    numpy_to_proto,
    outputs_to_json,
    parse_predict_body,
)

DTYPES = {"prompt": 7, "max_new_tokens": 3, "temperature": 1, "seed": 9}


def parse(doc: object) -> tuple[str, dict[str, np.ndarray], str]:
    return parse_predict_body(json.dumps(doc).encode(), lambda sig: DTYPES)


def row(**over: object) -> dict[str, object]:
    base: dict[str, object] = {"prompt": "hi", "max_new_tokens": 4, "temperature": 0.5, "seed": 7}
    base.update(over)
    return base


def test_row_and_columnar_forms_give_the_same_tensors() -> None:
    _, by_row, fmt_row = parse({"instances": [row(), row(prompt={"b64": "aGV5"})]})
    _, by_col, fmt_col = parse(
        {
            "inputs": {
                "prompt": ["hi", "hey"],
                "max_new_tokens": [4, 4],
                "temperature": [0.5, 0.5],
                "seed": [7, 7],
            }
        }
    )
    assert (fmt_row, fmt_col) == ("row", "columnar")
    for name in DTYPES:
        assert by_row[name].tolist() == by_col[name].tolist()
    assert by_row["prompt"].tolist() == [b"hi", b"hey"]
    assert by_row["seed"].dtype == np.int64 and by_row["temperature"].dtype == np.float32


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        (
            {"instances": [row(seed=1.0)]},
            "JSON Value: 1.0 Type: Number is not of expected type: int64",
        ),
        ({"instances": [row(max_new_tokens="4")]}, "Type: String is not of expected type: int32"),
        ({"instances": [row(prompt=3)]}, "is not of expected type: string"),
        ({"instances": []}, "No values in 'instances' array"),
        ({"instances": [row()], "inputs": {}}, "expecting only one of 'inputs' or 'instances'"),
        ({"nothing": 1}, "Missing 'inputs' or 'instances' key"),
        ({"instances": ["a", "b"]}, "instances is a plain list, but expecting list of objects"),
        (
            {"instances": [{"prompt": "x"}]},
            "keys must be equal to: max_new_tokens,prompt,seed,temperature",
        ),
        ({"inputs": {"prompt": ["x"]}}, "Missing named input: max_new_tokens in 'inputs' object."),
        (
            {"signature_name": 5, "instances": [row()]},
            "'signature_name' key must be a string value.",
        ),
        ({"instances": [row(prompt={"b64": "!!"})]}, "Unable to base64 decode"),
    ],
)
def test_bad_input_is_invalid_argument_with_tf_serving_wording(doc: object, needle: str) -> None:
    with pytest.raises(ServingError) as err:
        parse(doc)
    assert err.value.code == "INVALID_ARGUMENT"
    assert needle in err.value.message


def test_unparseable_body_names_the_json_error() -> None:
    with pytest.raises(ServingError, match="JSON Parse error"):
        parse_predict_body(b"{nope", lambda sig: DTYPES)
    with pytest.raises(ServingError, match="The document is empty"):
        parse_predict_body(b"", lambda sig: DTYPES)


@pytest.mark.parametrize(
    ("value", "single", "text"),
    [
        (2.0, True, "2.0"),
        (0.1, True, "0.1"),
        (9000000.0, False, "9e+06"),
        (float("nan"), True, "NaN"),
        (float("-inf"), False, "-Infinity"),
        (float(np.float32(1.3043017)), True, "1.30430174"),
        (0.3, False, "0.3"),
    ],
)
def test_floats_print_like_tf_serving(value: float, single: bool, text: str) -> None:
    assert format_float(value, single) == text


def test_row_output_is_a_list_of_objects_and_bytes_outputs_are_b64() -> None:
    outputs = {
        "text": np.array([b"ab", b"c"], dtype=object),
        "n": np.array([1, 2], np.int32),
        "raw_bytes": np.array([b"\x00", b"\x01"], dtype=object),
    }
    doc = json.loads(outputs_to_json(outputs, {"text": 7, "n": 3, "raw_bytes": 7}, "row"))
    assert doc == {
        "predictions": [
            {"n": 1, "raw_bytes": {"b64": "AA=="}, "text": "ab"},
            {"n": 2, "raw_bytes": {"b64": "AQ=="}, "text": "c"},
        ]
    }
    col = json.loads(outputs_to_json(outputs, {"text": 7, "n": 3, "raw_bytes": 7}, "columnar"))
    assert col["outputs"]["n"] == [1, 2]
    single = json.loads(outputs_to_json({"y": np.array([1.0], np.float32)}, {"y": 1}, "row"))
    assert single == {"predictions": [1.0]}


def test_error_body_is_a_pretty_json_object() -> None:
    assert error_json('a "b"') == '{\n    "error": "a \\"b\\""\n}'


@pytest.mark.parametrize(
    "body",
    [
        b'{"instances": [{"prompt": "\\ud800", "max_new_tokens": 1, "temperature": 0.5, '
        b'"seed": 1}]}',
        b'{"signature_name": "\\udc00x", "instances": ["a"]}',
        b'{"inputs": {"\\uD83D": 1}}',
    ],
)
def test_lone_surrogate_escapes_are_a_parse_error(body: bytes) -> None:
    with pytest.raises(ServingError) as err:
        parse_predict_body(body, lambda sig: DTYPES)
    assert err.value.code == "INVALID_ARGUMENT"
    assert err.value.message == "JSON Parse error: The surrogate pair in string is invalid."


def test_paired_surrogate_escapes_are_one_character() -> None:
    body = (
        b'{"inputs": {"prompt": ["\\ud83d\\ude00"], "max_new_tokens": [1], '
        b'"temperature": [0.5], "seed": [1]}}'
    )
    _, inputs, _ = parse_predict_body(body, lambda sig: DTYPES)
    assert inputs["prompt"][0] == "\U0001f600".encode()


@pytest.mark.parametrize("depth", [300, 1_001, 100_000])
def test_deep_nesting_is_invalid_argument_not_a_crash(depth: int) -> None:
    body = b'{"inputs": ' + b"[" * depth + b"1" + b"]" * depth + b"}"
    with pytest.raises(ServingError) as err:
        parse_predict_body(body, lambda sig: {"x": 1})
    assert err.value.code == "INVALID_ARGUMENT"
    assert "nest" in err.value.message


def test_error_body_survives_text_utf8_cannot_carry() -> None:
    body = error_json('Serving signature name: "\ud800" not found')
    assert json.loads(body.encode())["error"] == 'Serving signature name: "\ufffd" not found'


def test_numpy_to_proto_uses_val_fields() -> None:
    proto = numpy_to_proto(np.array([1.5, 2.5], np.float32), 1)
    assert list(proto.float_val) == [1.5, 2.5] and not proto.tensor_content
    assert [d.size for d in proto.tensor_shape.dim] == [2]


def test_more_rows_than_the_batch_limit_are_refused_before_conversion() -> None:
    body = json.dumps({"instances": [row()] * 40}).encode()
    with pytest.raises(
        ServingError, match="Task size 40 is larger than maximum input batch size 32"
    ):
        parse_predict_body(body, lambda sig: DTYPES, max_rows=32)
    assert parse_predict_body(body, lambda sig: DTYPES, max_rows=40)[1]["seed"].shape == (40,)
