"""The `continue` signature through the model server: REST (`b64` bytes) and gRPC, batched."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import numpy as np
import pytest

from tests.support.modelserver import ModelServerProcess
from tokenpulse.tfserving import signature as sig
from tokenpulse.tfserving.predict import parse_predictions, predict_path, row_request

PROCESSED = ":tensorflow:serving:batching_session:processed_batch_size"


def rest_predict(server: ModelServerProcess, rows: list[dict], name: str) -> list[dict]:
    body = row_request(rows, name)
    resp = httpx.post(server.rest_url + predict_path("gen"), json=body, timeout=60)
    assert resp.status_code == 200, resp.text
    return parse_predictions(resp.json(), len(rows))


def request(prompt: str, max_new_tokens: int, **kw: Any) -> dict:
    return sig.default_row(prompt, max_new_tokens) | kw


def resumed(req: dict, generated: bytes, chunk: int, ids: str | None = None) -> dict:
    """A `continue` row after `generated`, the bytes of the tokens `ids` (None: the model
    tokenizes the bytes)."""
    step = len(generated) if ids is None else len(ids.split())
    return req | {"generated": generated, "generated_ids": ids or "", "step": step, "chunk": chunk}


def rest_row(*args: Any) -> dict:
    """A `continue` row for REST: `generated` as `{"b64": ...}` (it may be partial UTF-8)."""
    row = resumed(*args)
    return row | {"generated": {"b64": base64.b64encode(row["generated"]).decode("ascii")}}


def rest_stream(server: ModelServerProcess, req: dict, chunk: int) -> tuple[bytes, list[dict]]:
    generated, ids, answers = b"", "", []
    while True:
        (out,) = rest_predict(server, [rest_row(req, generated, chunk, ids)], "continue")
        answers.append(out)
        generated += bytes(out["tokens"][: out["n_tokens"]])
        ids = f"{ids} {out['token_ids']}".strip()
        if out["finish_reason"]:
            return generated, answers


def grpc_continue(channel: grpc.Channel, rows: list[tuple[Any, ...]]) -> dict:
    """One gRPC Predict of `continue` rows (`resumed`'s arguments) -> numpy outputs."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    req = predict_pb2.PredictRequest()
    req.model_spec.name = "gen"
    req.model_spec.signature_name = sig.CONTINUE_SIGNATURE_NAME
    table = [resumed(*r) for r in rows]
    values = {name: [r[name] for r in table] for name in sig.CONTINUE_INPUTS}
    for name, kind in sig.CONTINUE_INPUTS.items():
        req.inputs[name].CopyFrom(tf.make_tensor_proto(values[name], dtype=tf.as_dtype(kind)))
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    resp = stub.Predict(req, timeout=60)
    assert resp.model_spec.signature_name == sig.CONTINUE_SIGNATURE_NAME
    return {k: tf.make_ndarray(v) for k, v in resp.outputs.items()}


@pytest.fixture(scope="module")
def channel(server: ModelServerProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server.grpc_target) as ch:
        yield ch


def histogram(server: ModelServerProcess, name: str) -> tuple[float, float]:
    """(sum, count) of an unlabelled histogram on the server's Prometheus page."""
    values = {}
    for line in server.metrics_text().splitlines():
        for part in ("_sum", "_count"):
            if line.startswith((f"{name}{part} ", f"{name}{part}{{}} ")):
                values[part] = float(line.rsplit(" ", 1)[1])
    return values.get("_sum", 0.0), values.get("_count", 0.0)


def test_rest_streams_with_b64_bytes_as_unary(server: ModelServerProcess) -> None:
    req = request("ééééé", 30, temperature=2.0, seed=4)
    (whole,) = rest_predict(server, [req], sig.SIGNATURE_NAME)
    generated, answers = rest_stream(server, req, 4)
    assert any(b >= 0x80 for b in generated)  # bytes JSON strings could not carry as they are
    assert generated.decode("utf-8", "replace") == whole["text"]
    # the same subword tokens (n_tokens counts a chunk's bytes; n_scored its tokens, an end
    # token included)
    assert 0 <= sum(a["n_scored"] for a in answers) - whole["output_tokens"] <= 1
    assert answers[-1]["finish_reason"] == whole["finish_reason"]
    assert all(a["finish_reason"] == "" for a in answers[:-1])
    nll = sum(a["nll_sum"] for a in answers) / sum(a["n_scored"] for a in answers)
    assert nll == pytest.approx(whole["mean_nll"], abs=1e-4)
    assert answers[0]["prompt_tokens"] == whole["prompt_tokens"]


def test_rest_rows_carry_stop_sequences_and_ignore_eos(server: ModelServerProcess) -> None:
    req = request("Return the number of", 30, temperature=1.0, seed=8, ignore_eos=1)
    generated, answers = rest_stream(server, req, 8)
    assert sum(a["n_scored"] for a in answers) == 30  # ignore_eos: only the length ends it
    stop = generated[:4].decode()  # its first bytes end there first, within 4 tokens
    rows = [req | {"stop": sig.stop_slots(["\x01", stop])}, req]
    stopped, whole = rest_predict(server, rows, sig.SIGNATURE_NAME)
    assert (stopped["text"], stopped["stop_index"]) == ("", 1)
    assert 1 <= stopped["output_tokens"] <= 4
    assert stopped["finish_reason"] == sig.FINISH_STOP
    assert (whole["stop_index"], whole["finish_reason"]) == (sig.NO_STOP, sig.FINISH_LENGTH)
    at_stop, _ = rest_stream(server, rows[0], 3)
    assert at_stop == generated[:4]  # streamed: the stop's bytes come, split over two chunks


def test_grpc_streams_raw_bytes_as_unary(server: ModelServerProcess, channel: grpc.Channel) -> None:
    req = request("Return the number of", 20, temperature=1.0, seed=8)
    (whole,) = rest_predict(server, [req], sig.SIGNATURE_NAME)
    generated, ids = b"", ""
    while True:
        out = grpc_continue(channel, [(req, generated, 8, ids)])
        generated += out["tokens"][0, : out["n_tokens"][0]].astype(np.uint8).tobytes()
        ids = f"{ids} {out['token_ids'][0].decode()}".strip()
        if out["finish_reason"][0]:
            break
    assert generated.decode("utf-8", "replace") == whole["text"]
    assert out["finish_reason"][0].decode() == whole["finish_reason"]


def test_concurrent_continue_calls_are_batched_and_answer_as_alone(
    server: ModelServerProcess, channel: grpc.Channel
) -> None:
    reqs = [request(f"prompt {i} of the batch", 40, temperature=1.0, seed=i) for i in range(24)]
    stops = [[], ["e"], [" ", "\n"], ["é", "t"]]  # rows of one batch stop where each would alone
    reqs = [r | {"stop": sig.stop_slots(stops[i % 4])} for i, r in enumerate(reqs)]
    # rows resumed after bytes alone (tokenized by the model) and after ids, in one batch
    rows = [(r, b"abc"[: i % 4], 16 - i % 3, None if i % 5 else "7 3") for i, r in enumerate(reqs)]
    alone = [grpc_continue(channel, [row]) for row in rows]
    before = histogram(server, PROCESSED)
    answers: dict[int, Any] = {}
    start = threading.Barrier(len(rows))

    def call(i: int) -> None:
        start.wait(30)
        if i % 2:  # half over gRPC, half over REST: both reach the same batch queue
            answers[i] = grpc_continue(channel, [rows[i]])
        else:
            (out,) = rest_predict(server, [rest_row(*rows[i])], "continue")
            out["finish_reason"] = out["finish_reason"].encode()  # as gRPC's bytes
            answers[i] = {k: np.array([v]) for k, v in out.items()}

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(rows))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    after = histogram(server, PROCESSED)
    batches, rows_run = after[1] - before[1], after[0] - before[0]
    assert rows_run >= len(rows) and 0 < batches < len(rows)  # some calls shared a batch
    for i, solo in enumerate(alone):
        got = answers[i]
        n = int(solo["n_tokens"][0])
        assert int(got["n_tokens"][0]) == n
        assert list(got["tokens"][0][:n]) == list(solo["tokens"][0][:n])
        assert got["finish_reason"][0] == solo["finish_reason"][0]
        assert int(got["stop_index"][0]) == int(solo["stop_index"][0])
        assert float(got["nll_sum"][0]) == pytest.approx(float(solo["nll_sum"][0]), abs=1e-4)
