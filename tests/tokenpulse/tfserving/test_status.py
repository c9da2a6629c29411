"""Model status and metadata documents."""

from __future__ import annotations

import pytest

from tokenpulse.tfserving.errors import TfServingBadResponse
from tokenpulse.tfserving.status import (
    VERSION_STATES,
    VersionStatus,
    available_versions,
    parse_model_metadata,
    parse_model_status,
    status_document,
)

STATUS = {
    "model_version_status": [
        {"version": "3", "state": "LOADING", "status": {"error_code": "OK", "error_message": ""}},
        {"version": "2", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}},
        {
            "version": "1",
            "state": "END",
            "status": {"error_code": "NOT_FOUND", "error_message": "x"},
        },
    ]
}


def test_status_round_trips_and_lists_available_versions() -> None:
    statuses = parse_model_status(STATUS)
    assert statuses[2] == VersionStatus(1, "END", "NOT_FOUND", "x")
    assert available_versions(statuses) == [2]
    assert status_document(list(reversed(statuses))) == STATUS


def test_states_in_lifecycle_order_and_unknown_states_fold() -> None:
    assert VERSION_STATES == ("START", "LOADING", "AVAILABLE", "UNLOADING", "END", "UNKNOWN")
    doc = {"model_version_status": [{"version": "1", "state": "WEIRD"}]}
    assert parse_model_status(doc) == [VersionStatus(1, "UNKNOWN")]


@pytest.mark.parametrize(
    "doc",
    [
        None,
        {"model_version_status": "nope"},
        {"model_version_status": ["x"]},
        {"model_version_status": [{"state": "AVAILABLE"}]},
        {"model_version_status": [{"version": "one", "state": "AVAILABLE"}]},
        {"model_version_status": [{"version": "1"}]},
    ],
)
def test_malformed_status_is_a_bad_response(doc: object) -> None:
    with pytest.raises(TfServingBadResponse):
        parse_model_status(doc)


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


def test_status_document_is_what_the_model_server_writes_from_protobuf() -> None:
    import json

    from serving.modelserver.manager import VersionState
    from serving.modelserver.protos import status_json

    states = {1: VersionState("END", "NOT_FOUND", "gone"), 2: VersionState("AVAILABLE")}
    written = json.loads(status_json("gen", states))
    statuses = parse_model_status(written)
    assert statuses == [VersionStatus(2, "AVAILABLE"), VersionStatus(1, "END", "NOT_FOUND", "gone")]
    assert status_document(statuses) == written
