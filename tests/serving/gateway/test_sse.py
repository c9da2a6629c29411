"""Every stream event is built without validation; its model accepts what it builds."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from serving.gateway import chat, completions, native, sse
from serving.gateway.errors import DeadlineExceeded
from serving.gateway.jobs import Job
from serving.gateway.streaming import Piece
from tokenpulse.samples import OutputSignals, RequestStats

STREAMS: list[tuple[type, type[BaseModel]]] = [
    (completions.CompletionStream, completions.CompletionChunk),
    (chat.ChatStream, chat.ChatCompletionChunk),
    (native.NativeStream, native.GenerateChunk),
]


@pytest.mark.parametrize(("stream", "model"), STREAMS)
def test_each_event_is_one_data_line_its_model_validates(stream: type, model: type) -> None:
    job = Job("gen", ["a"], 4, 1.0, 0, 1.0, 7, stream=True, include_usage=True)
    stats = RequestStats(request_id="r1", route="x", model="gen", version="2")
    events = stream(job, stats)
    built = [*events.begin(), *events.pieces([Piece(0, "hé\nllo"), Piece(0, "!", "stop")])]
    stats.outputs.append(OutputSignals(3, 4, "stop", False, 0.0, 1.0))
    built += events.end()
    for event in built:
        line = sse.event(event)
        assert line.startswith(b"data: ") and line.endswith(b"\n\n") and line.count(b"\n") == 2
        doc = json.loads(line[6:])
        assert json.loads(model.model_validate(doc).model_dump_json()) == doc
    last = json.loads(sse.event(built[-1])[6:])
    assert last["usage"]["total_tokens"] == 7
    strings = _strings([json.loads(sse.event(e)[6:]) for e in built])
    assert "hé\nllo" in strings and "!" in strings  # the text survives, newline and all


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [s for v in value for s in _strings(v)] if isinstance(value, list) else []


def test_the_error_event_is_the_openai_error_shape() -> None:
    line = sse.error_event(DeadlineExceeded("deadline exceeded: slow"), "r1")
    doc = json.loads(line[6:])
    assert doc == {
        "error": {
            "message": "deadline exceeded: slow",
            "type": "server_error",
            "param": None,
            "code": "deadline_exceeded",
        }
    }
    assert sse.DONE == b"data: [DONE]\n\n"
