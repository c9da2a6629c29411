"""Model status documents."""

from __future__ import annotations

import pytest

from tokenpulse.tfserving.errors import TfServingBadResponse
from tokenpulse.tfserving.status import (
    VERSION_STATES,
    VersionStatus,
    available_versions,
    parse_model_status,
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


def test_status_parses_and_lists_available_versions() -> None:
    statuses = parse_model_status(STATUS)
    assert statuses[2] == VersionStatus(1, "END", "NOT_FOUND", "x")
    assert available_versions(statuses) == [2]


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


def test_the_model_servers_status_document_parses() -> None:
    import json

    from serving.modelserver.manager import VersionState
    from serving.modelserver.protos import status_json

    states = {1: VersionState("END", "NOT_FOUND", "gone"), 2: VersionState("AVAILABLE")}
    written = json.loads(status_json("gen", states))
    statuses = parse_model_status(written)
    assert statuses == [VersionStatus(2, "AVAILABLE"), VersionStatus(1, "END", "NOT_FOUND", "gone")]
