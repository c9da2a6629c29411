"""The REST client against a stand-in speaking TF Serving's wire format."""

from __future__ import annotations

import pytest

from devtools.standins.tfserving import TfServingStandin
from exporter.tfserving.client import TfServingClient
from tokenpulse.procs import free_port
from tokenpulse.tfserving.errors import (
    TfServingBadResponse,
    TfServingHttpError,
    TfServingUnreachable,
)
from tokenpulse.tfserving.status import VersionStatus


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
