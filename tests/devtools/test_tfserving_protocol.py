"""The protocol halves only tests and stand-ins speak: columnar predicts, metadata, status."""

from __future__ import annotations

import json

import pytest

from devtools.tfserving_protocol import (
    columnar_request,
    parse_model_metadata,
    parse_outputs,
    status_document,
)
from tests.tokenpulse.tfserving.test_status import STATUS
from tokenpulse.tfserving.errors import TfServingBadResponse
from tokenpulse.tfserving.status import VersionStatus, parse_model_status


def test_columnar_request_and_outputs() -> None:
    assert columnar_request({"x": [1]}) == {"inputs": {"x": [1]}}
    assert columnar_request({"x": [1]}, "s") == {"signature_name": "s", "inputs": {"x": [1]}}
    assert parse_outputs({"outputs": {"text": ["a"]}}) == {"text": ["a"]}
    assert parse_outputs({"outputs": [1, 2]}) == {"": [1, 2]}
    with pytest.raises(TfServingBadResponse):
        parse_outputs({"predictions": []})


def test_status_document_round_trips() -> None:
    statuses = parse_model_status(STATUS)
    assert status_document(list(reversed(statuses))) == STATUS


def test_status_document_is_what_the_model_server_writes_from_protobuf() -> None:
    from serving.modelserver.manager import VersionState
    from serving.modelserver.protos import status_json

    states = {1: VersionState("END", "NOT_FOUND", "gone"), 2: VersionState("AVAILABLE")}
    written = json.loads(status_json("gen", states))
    statuses = parse_model_status(written)
    assert statuses == [VersionStatus(2, "AVAILABLE"), VersionStatus(1, "END", "NOT_FOUND", "gone")]
    assert status_document(statuses) == written


METADATA = {
    "model_spec": {"name": "gen", "signature_name": "", "version": {"value": "2"}},
    "metadata": {
        "signature_def": {
            "signature_def": {
                "serving_default": {
                    "inputs": {
                        "prompt": {
                            "dtype": "DT_STRING",
                            "tensor_shape": {
                                "dim": [{"size": "-1", "name": ""}],
                                "unknown_rank": False,
                            },
                            "name": "serving_default_prompt:0",
                        }
                    },
                    "outputs": {
                        "text": {
                            "dtype": "DT_STRING",
                            "tensor_shape": {"dim": [], "unknown_rank": True},
                        }
                    },
                    "method_name": "tensorflow/serving/predict",
                }
            }
        }
    },
}


def test_metadata_reads_the_nested_signature_map() -> None:
    meta = parse_model_metadata(METADATA)
    assert (meta.name, meta.version) == ("gen", 2)
    sig = meta.signatures["serving_default"]
    assert sig.inputs["prompt"].dtype == "DT_STRING" and sig.inputs["prompt"].shape == (-1,)
    assert sig.outputs["text"].shape is None
    assert sig.method_name == "tensorflow/serving/predict"


def test_metadata_without_the_nested_map_is_a_bad_response() -> None:
    flat = {"model_spec": {"name": "gen"}, "metadata": {"signature_def": {"serving_default": {}}}}
    with pytest.raises(TfServingBadResponse, match="signature_def.signature_def"):
        parse_model_metadata(flat)
