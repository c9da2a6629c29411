"""gRPC PredictionService and ModelService through tensorflow-serving-api's own stubs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import numpy as np
import pytest

from tests.support.modelserver import ModelServerProcess
from tokenpulse.tfserving import signature as sig


@pytest.fixture(scope="module")
def channel(server: ModelServerProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server.grpc_target) as ch:
        yield ch


def predict_request(model: str = "gen", prompts: tuple[str, ...] = ("hi",), **spec: Any) -> Any:
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    req = predict_pb2.PredictRequest()
    req.model_spec.name = model
    if "version" in spec:
        req.model_spec.version.value = spec["version"]
    if "label" in spec:
        req.model_spec.version_label = spec["label"]
    n = len(prompts)
    for name, values, dtype in [
        ("prompt", list(prompts), tf.string),
        ("max_new_tokens", [3] * n, tf.int32),
        ("temperature", [0.0] * n, tf.float32),
        ("top_k", [0] * n, tf.int32),
        ("top_p", [1.0] * n, tf.float32),
        ("seed", [0] * n, tf.int64),
        ("stop", [sig.stop_slots(["\n"])] * n, tf.string),
        ("ignore_eos", [0] * n, tf.int32),
    ]:
        req.inputs[name].CopyFrom(tf.make_tensor_proto(values, dtype=dtype))
    return req


def stub(channel: grpc.Channel) -> Any:
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


def test_predict_answers_with_version_and_outputs(channel: grpc.Channel) -> None:
    import tensorflow as tf

    resp = stub(channel).Predict(predict_request(prompts=("a", "bb")), timeout=60)
    assert (resp.model_spec.name, resp.model_spec.version.value) == ("gen", 2)
    assert resp.model_spec.signature_name == "serving_default"
    text = tf.make_ndarray(resp.outputs["text"])
    assert text.shape == (2,)
    assert list(resp.outputs["output_tokens"].int_val)  # AsProtoField: *_val fields


@pytest.mark.parametrize(
    ("spec", "version"), [({"version": 1}, 1), ({"label": "stable"}, 1), ({"label": "canary"}, 2)]
)
def test_version_and_label_routing(
    channel: grpc.Channel, spec: dict[str, Any], version: int
) -> None:
    resp = stub(channel).Predict(predict_request(**spec), timeout=60)
    assert resp.model_spec.version.value == version


def test_output_filter_returns_only_those_outputs(channel: grpc.Channel) -> None:
    req = predict_request()
    req.output_filter.append("text")
    resp = stub(channel).Predict(req, timeout=60)
    assert list(resp.outputs) == ["text"]


def _error(call: Any, request: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        call(request, timeout=60)
    return err.value


def test_errors_carry_tf_serving_codes(channel: grpc.Channel) -> None:
    import tensorflow as tf

    predict = stub(channel).Predict
    err = _error(predict, predict_request(model="nope"))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert err.details() == "Servable not found for request: Latest(nope)"
    assert _error(predict, predict_request(label="nope")).code() == grpc.StatusCode.INVALID_ARGUMENT
    req = predict_request()
    req.model_spec.signature_name = "missing"
    err = _error(predict, req)
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert err.details() == 'Serving signature key "missing" not found.'
    req = predict_request()
    req.output_filter.append("nope")
    err = _error(predict, req)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith("output tensor alias not found in signature: nope")
    req = predict_request()
    del req.inputs["seed"]
    err = _error(predict, req)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Missing but required: {seed}" in err.details()
    req = predict_request()
    req.inputs["seed"].CopyFrom(tf.make_tensor_proto([0.5], dtype=tf.float32))
    err = _error(predict, req)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "to be int64 but float is provided" in err.details()


def test_get_model_metadata_packs_signature_defs(channel: grpc.Channel) -> None:
    from tensorflow_serving.apis import get_model_metadata_pb2

    req = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    req.model_spec.name = "gen"
    resp = stub(channel).GetModelMetadata(req, timeout=30)
    sig_map = get_model_metadata_pb2.SignatureDefMap()
    resp.metadata["signature_def"].Unpack(sig_map)
    assert "prompt" in sig_map.signature_def["serving_default"].inputs
    assert resp.model_spec.version.value == 2
    req.metadata_field[:] = ["other"]
    err = _error(stub(channel).GetModelMetadata, req)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_get_model_status(channel: grpc.Channel) -> None:
    from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc

    service = model_service_pb2_grpc.ModelServiceStub(channel)
    req = get_model_status_pb2.GetModelStatusRequest()
    req.model_spec.name = "gen"
    resp = service.GetModelStatus(req, timeout=30)
    assert [(s.version, s.state) for s in resp.model_version_status] == [(2, 30), (1, 30)]
    req.model_spec.name = "nope"
    err = _error(service.GetModelStatus, req)
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert err.details() == "Could not find any versions of model nope"


def test_grpc_requests_are_recorded_with_grpc_entrypoint(
    server: ModelServerProcess, channel: grpc.Channel
) -> None:
    from tensorflow_serving.apis import get_model_metadata_pb2

    def value(text: str, prefix: str) -> float:
        lines = [ln for ln in text.splitlines() if ln.startswith(prefix)]
        return float(lines[0].rsplit(" ", 1)[1]) if lines else 0.0

    latency = (
        ":tensorflow:serving:request_latency_count"
        '{model_name="gen",API="Predict",entrypoint="GRPC"}'
    )
    # a model that is not configured is counted under one fixed name, not its own
    failed = ':tensorflow:serving:request_count{model_name="__unknown__",status="NOT_FOUND"}'
    ok = ':tensorflow:serving:request_count{model_name="gen",status="OK"}'
    before = server.metrics_text()
    stub(channel).Predict(predict_request(), timeout=60)
    _error(stub(channel).Predict, predict_request(model="nope"))
    meta = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    meta.model_spec.name = "gen"
    stub(channel).GetModelMetadata(meta, timeout=30)  # not a counted request
    after = server.metrics_text()
    assert value(after, latency) - value(before, latency) == 1
    assert value(after, failed) - value(before, failed) == 1
    assert value(after, ok) - value(before, ok) == 1
    assert np.isfinite(value(after, latency))
