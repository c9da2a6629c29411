"""The REST client against a stand-in speaking TF Serving's wire format."""

from __future__ import annotations

import pytest

from exporter.tfserving_client import (
    TfServingBadResponse,
    TfServingClient,
    TfServingHttpError,
    TfServingUnreachable,
    VersionStatus,
    parse_model_status,
)
from tokenpulse.procs import free_port
from tokenpulse.testing.tfserving_standin import TfServingStandin


@pytest.fixture
def tfs():
    with TfServingStandin() as standin:
        standin.state.versions["gen"] = {1: "AVAILABLE", 2: "LOADING"}
        yield standin


def test_status_versions_are_ints_and_newest_first(tfs):
    assert TfServingClient(tfs.url).model_status("gen") == [
        VersionStatus(2, "LOADING", "OK", ""),
        VersionStatus(1, "AVAILABLE", "OK", ""),
    ]


def test_unknown_model_has_no_versions(tfs):
    assert TfServingClient(tfs.url).model_status("other") == []


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("malformed", TfServingBadResponse),
        ("wrong_shape", TfServingBadResponse),
        ("error", TfServingHttpError),
    ],
)
def test_bad_status_answers(tfs, mode, error):
    tfs.state.status_mode = mode
    with pytest.raises(error):
        TfServingClient(tfs.url).model_status("gen")


def test_nothing_listening():
    with pytest.raises(TfServingUnreachable, match="Connection refused"):
        TfServingClient(f"http://127.0.0.1:{free_port()}", timeout_s=1).model_status("gen")


def test_predict_row_format(tfs):
    tfs.state.answers[("gen", 1)] = {"hi": ("there", 0.5)}
    [pred] = TfServingClient(tfs.url).predict("gen", 1, [{"prompt": "hi"}], timeout_s=5)
    assert pred["text"] == "there" and pred["mean_nll"] == 0.5


def test_predict_error_carries_tf_serving_message(tfs):
    with pytest.raises(TfServingHttpError, match="Servable not found") as info:
        TfServingClient(tfs.url).predict("gen", 2, [{"prompt": "hi"}], timeout_s=5)
    assert info.value.status == 404


def test_unknown_states_map_to_unknown_and_status_errors_are_kept():
    doc = {
        "model_version_status": [
            {"version": "3", "state": "WEIRD"},
            {
                "version": "2",
                "state": "END",
                "status": {"error_code": "NOT_FOUND", "error_message": "gone"},
            },
        ]
    }
    assert parse_model_status(doc) == [
        VersionStatus(3, "UNKNOWN", "OK", ""),
        VersionStatus(2, "END", "NOT_FOUND", "gone"),
    ]


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"model_version_status": [1]},
        {"model_version_status": [{"state": "END"}]},
        {"model_version_status": [{"version": "x", "state": "END"}]},
        {"model_version_status": [{"version": "1"}]},
    ],
)
def test_malformed_status_documents(doc):
    with pytest.raises(TfServingBadResponse):
        parse_model_status(doc)
