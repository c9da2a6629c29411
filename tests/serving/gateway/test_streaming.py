"""Streaming through a real gateway process, with the `openai` SDK, against a `continue` stand-in
whose chunk boundaries the tests know (chunks of 4 bytes)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest

from tests.serving.gateway.fake_continue import FakeContinue, FakeState
from tests.serving.gateway.helpers import auth, metric_value
from tests.support.gateway import GatewayProcess, make_keys_file, running_gateway

CHUNK = 4


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[GatewayProcess, FakeContinue, dict[str, str]]]:
    """One gateway streaming in chunks of 4 from the stand-in, shared by this module."""
    path = tmp_path_factory.mktemp("streaming") / "keys.json"
    keys = make_keys_file(path, demo={}, limited={"requests_per_minute": 1})
    with (
        FakeContinue(FakeState()) as up,
        running_gateway(
            up.url, path, stream_chunk_tokens=CHUNK, stream_first_chunk_tokens=CHUNK,
            max_new_tokens_limit=64,
            context_window_tokens=96,
        ) as gw,
    ):  # fmt: skip
        yield gw, up, keys


@pytest.fixture
def fake(served: tuple[GatewayProcess, FakeContinue, dict[str, str]]) -> Iterator[FakeContinue]:
    """The stand-in, its state reset after the test."""
    up = served[1]
    yield up
    up.state = FakeState()


def _client(served: tuple[GatewayProcess, FakeContinue, dict[str, str]]) -> openai.OpenAI:
    gw, _, keys = served
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=keys["demo"], max_retries=0)


def _events(resp: httpx.Response) -> list[str]:
    return [line[6:] for line in resp.text.split("\n\n") if line.startswith("data: ")]


def test_streamed_completion_equals_unary_and_ends_with_usage(served, fake) -> None:
    fake.state.outputs["p"] = b"The quick brown fox"
    client = _client(served)
    unary = client.completions.create(model="gen", prompt="p", max_tokens=48, seed=3)
    chunks = list(
        client.completions.create(
            model="gen",
            prompt="p",
            max_tokens=48,
            seed=3,
            stream=True,
            stream_options={"include_usage": True},
        )  # fmt: skip
    )
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == unary.choices[0].text == "The quick brown fox"
    assert all(c.object == "text_completion" for c in chunks)
    assert [c.choices[0].text for c in chunks if c.choices][:2] == ["The ", "quic"]
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == unary.usage.completion_tokens == 19
    assert len({c.id for c in chunks}) == 1 and chunks[0].system_fingerprint == "gen:v1"


def test_a_stop_sequence_split_between_chunks_stops_without_leaking_its_first_half(
    served, fake
) -> None:
    fake.state.outputs["p"] = b"abcdEFGHij"  # chunks: abcd | EFGH | ij
    client = _client(served)
    stream = client.completions.create(
        model="gen", prompt="p", max_tokens=48, stop=["dE"], stream=True
    )
    pieces = [c.choices[0].text for c in stream]
    assert "".join(pieces) == "abc" and not any("d" in p for p in pieces)
    unary = client.completions.create(model="gen", prompt="p", max_tokens=48, stop=["dE"])
    assert unary.choices[0].text == "abc" and unary.choices[0].finish_reason == "stop"
    # a held prefix that does not complete a stop sequence is sent with the next chunk
    stream = client.completions.create(
        model="gen", prompt="p", max_tokens=48, stop=["dX"], stream=True
    )
    assert "".join(c.choices[0].text for c in stream) == "abcdEFGHij"


def test_a_character_split_across_chunks_arrives_whole(served, fake) -> None:
    fake.state.outputs["p"] = "abcé€ok".encode()  # é straddles bytes 3-4: chunks abc\xc3 | ...
    client = _client(served)
    pieces = [
        c.choices[0].text
        for c in client.completions.create(model="gen", prompt="p", max_tokens=48, stream=True)
    ]
    assert pieces[0] == "abc" and "".join(pieces) == "abcé€ok"
    assert "\ufffd" not in "".join(pieces)


def test_chat_streamed_and_unary(served, fake) -> None:
    prompt = "System: Be brief.<|endofturn|>\nUser: Hi<|endofturn|>\nAssistant: "
    fake.state.outputs[prompt] = b"Hello there.\nUser: and the model goes on"
    client = _client(served)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    unary = client.chat.completions.create(model="gen", messages=messages, seed=1)
    # the turn ends at the next role line (finish_reason stop), with no leading space
    assert unary.choices[0].message.content == "Hello there."
    assert unary.choices[0].finish_reason == "stop"
    assert unary.object == "chat.completion" and unary.choices[0].message.role == "assistant"
    chunks = list(
        client.chat.completions.create(
            model="gen",
            messages=messages,
            seed=1,
            stream=True,
            stream_options={"include_usage": True},
        )  # fmt: skip
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "Hello there." and chunks[-2].choices[0].finish_reason == "stop"
    assert all(c.object == "chat.completion.chunk" for c in chunks)


@pytest.mark.parametrize(
    ("messages", "words"),
    [
        ([{"role": "tool", "content": "x", "tool_call_id": "1"}], "tool messages"),
        ([{"role": "critic", "content": "x"}], "must be system, developer, user or assistant"),
        ([{"role": "assistant", "tool_calls": [{"id": "1"}]}], "tool calls"),
        ([{"role": "user", "content": [{"type": "image_url"}]}], "only text parts"),
        ([{"role": "user", "content": "x" * 110}], "maximum context length is 96"),
    ],
)
def test_chat_refuses_what_it_cannot_do_with_400(served, fake, messages, words) -> None:
    gw, _, keys = served
    resp = httpx.post(
        f"{gw.url}/v1/chat/completions",
        headers=auth(keys["demo"]),
        json={"model": "gen", "messages": messages},
    )
    assert resp.status_code == 400 and words in resp.json()["error"]["message"]


def test_a_stream_fits_the_window_in_the_models_tokens(served, fake) -> None:
    fake.state.bytes_per_token = 4  # a subword model: the prompt's 200 bytes are 50 tokens
    prompt = "word " * 40
    fake.state.outputs[prompt] = b"the answer"
    client = _client(served)
    pieces = client.completions.create(model="gen", prompt=prompt, max_tokens=32, stream=True)
    assert "".join(c.choices[0].text for c in pieces if c.choices) == "the answer"
    with pytest.raises(openai.BadRequestError, match=r"requested 97 tokens \(51 in the prompt"):
        client.completions.create(model="gen", prompt=prompt, max_tokens=46, stream=True)


def test_chat_tools_get_a_clear_400(served) -> None:
    client = _client(served)
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError, match="cannot call tools"):
        client.chat.completions.create(
            model="gen", messages=[{"role": "user", "content": "x"}], tools=[tool]
        )


def test_chat_window_takes_truncate_prompt_tokens(served, fake) -> None:
    client = _client(served)
    done = client.chat.completions.create(
        model="gen",
        messages=[{"role": "user", "content": "x" * 80}],
        max_tokens=8,
        extra_body={"truncate_prompt_tokens": 20},
    )
    assert done.choices[0].message.content == "hello wo"


def test_models_list_has_versions_and_labels(served) -> None:
    listed = list(_client(served).models.list())
    assert [m.id for m in listed] == ["gen"]
    assert listed[0].owned_by == "tokenpulse"
    extra = listed[0].model_extra or {}
    assert extra["max_model_len"] == 96
    assert extra["tokenpulse"] == {
        "versions": ["1"], "labels": {}, "streams": True, "stop_in_graph": True,
    }  # fmt: skip


def test_native_generate_streams_over_sse(served, fake) -> None:
    gw, _, keys = served
    fake.state.outputs["p"] = b"0123456789"
    with httpx.stream(
        "POST", f"{gw.url}/v1/generate", headers=auth(keys["demo"]),
        json={"prompt": "p", "stream": True, "max_new_tokens": 6},
    ) as resp:  # fmt: skip
        assert resp.headers["content-type"].startswith("text/event-stream")
        resp.read()
    events = _events(resp)
    assert events[-1] == "[DONE]"
    docs = [json.loads(e) for e in events[:-1]]
    assert [d["text"] for d in docs] == ["0123", "45", ""]
    assert docs[-1]["finish_reason"] == "length" and docs[-1]["usage"]["output_tokens"] == 6


def test_a_disconnect_cancels_the_upstream_and_counts_as_its_own_outcome(served, fake) -> None:
    gw, _, keys = served
    fake.state.outputs["p"] = b"x" * 64
    fake.state.delay_s = 0.4
    before = metric_value(gw.url, "tokenpulse_gateway_client_disconnects_total")
    calls = fake.calls["continue"]
    with httpx.stream(
        "POST", f"{gw.url}/v1/completions", headers=auth(keys["demo"]),
        json={"model": "gen", "prompt": "p", "max_tokens": 48, "stream": True},
    ) as resp:  # fmt: skip
        next(resp.iter_raw())  # the first chunk, then hang up while the second one runs
    time.sleep(1.2)
    assert fake.cancelled >= 1  # the chunk in flight was cancelled
    assert fake.calls["continue"] - calls == 2  # and no chunk after it was asked for
    assert metric_value(gw.url, "tokenpulse_gateway_client_disconnects_total") == before + 1
    assert metric_value(gw.url, "tokenpulse_gateway_requests_total", code="499") >= 1


def test_a_failure_after_the_first_byte_ends_with_an_openai_error_event(served, fake) -> None:
    fake.state.outputs["p"] = b"y" * 32
    fake.state.fail_from_call = fake.calls["continue"] + 2
    stream = _client(served).completions.create(model="gen", prompt="p", max_tokens=32, stream=True)
    got = []
    with pytest.raises(openai.APIError, match="upstream error 500"):
        for chunk in stream:
            got.append(chunk.choices[0].text)
    assert got == ["yyyy"]


def test_refusals_before_the_first_byte_keep_unary_status_codes(served, fake) -> None:
    gw, _, keys = served
    body = {"model": "gen", "prompt": "p", "stream": True}
    ok = httpx.post(f"{gw.url}/v1/completions", headers=auth(keys["limited"]), json=body)
    assert ok.status_code == 200
    limited = httpx.post(f"{gw.url}/v1/completions", headers=auth(keys["limited"]), json=body)
    assert limited.status_code == 429 and "Retry-After" in limited.headers
    too_long = {**body, "prompt": "x" * 80}
    refused = httpx.post(f"{gw.url}/v1/completions", headers=auth(keys["demo"]), json=too_long)
    assert refused.status_code == 400 and "maximum context length" in refused.text
    fake.state.window_drop = 3  # the model's window is smaller than the gateway was told
    dropped = httpx.post(f"{gw.url}/v1/completions", headers=auth(keys["demo"]), json=body)
    assert dropped.status_code == 400 and "dropped 3 prompt tokens" in dropped.text
    options = {**body, "stream": False, "stream_options": {"include_usage": True}}
    bad = httpx.post(f"{gw.url}/v1/completions", headers=auth(keys["demo"]), json=options)
    assert bad.status_code == 400 and "only allowed when stream is true" in bad.text


def test_stream_metrics_are_recorded(served, fake) -> None:
    gw, _, keys = served
    fake.state.outputs["p"] = b"z" * 12
    labels = {"model": "gen", "version": "1", "route": "completions"}
    before = metric_value(gw.url, "tokenpulse_gateway_requests_by_mode_total", mode="stream")
    ttft = metric_value(gw.url, "tokenpulse_gateway_time_to_first_token_seconds_count", **labels)
    itl = metric_value(gw.url, "tokenpulse_gateway_inter_token_latency_seconds_count", **labels)
    list(_client(served).completions.create(model="gen", prompt="p", max_tokens=12, stream=True))
    after = metric_value(gw.url, "tokenpulse_gateway_requests_by_mode_total", mode="stream")
    assert after == before + 1
    name = "tokenpulse_gateway_time_to_first_token_seconds_count"
    assert metric_value(gw.url, name, **labels) == ttft + 1
    name = "tokenpulse_gateway_inter_token_latency_seconds_count"
    assert metric_value(gw.url, name, **labels) == itl + 8  # tokens after the first chunk


def test_deadlines_apply_per_stream_with_unary_status_codes(served, fake) -> None:
    gw, _, keys = served
    fake.state.outputs["p"] = b"w" * 16
    fake.state.delay_s = 0.6
    headers = {**auth(keys["demo"]), "X-Request-Timeout": "1"}
    body = {"model": "gen", "prompt": "p", "max_tokens": 16, "stream": True}
    # an idle deadline: four chunks 0.6 s apart outlive a 1 s deadline, each within it
    resp = httpx.post(f"{gw.url}/v1/completions", headers=headers, json=body, timeout=10)
    assert resp.status_code == 200
    events = _events(resp)
    assert events[-1] == "[DONE]" and "error" not in events[-2]
    assert "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1]) == "w" * 16
    # a chunk slower than the deadline after the first: an error event
    with httpx.stream(
        "POST", f"{gw.url}/v1/completions", headers=headers, json=body, timeout=10
    ) as resp:
        lines = resp.iter_lines()
        assert json.loads(next(lines).removeprefix("data: "))["choices"][0]["text"] == "wwww"
        fake.state.delay_s = 1.5
        rest = [line.removeprefix("data: ") for line in lines if line]
    assert rest[-1] == "[DONE]" and json.loads(rest[-2])["error"]["code"] == "deadline_exceeded"
    # no chunk in time: the same 504 as unary
    late = httpx.post(f"{gw.url}/v1/completions", headers=headers, json=body, timeout=10)
    assert late.status_code == 504 and late.json()["error"]["code"] == "deadline_exceeded"


def test_a_disconnect_before_the_first_chunk_is_counted_and_cancels_it(served, fake) -> None:
    gw, _, keys = served
    fake.state.delay_s = 0.6
    before = metric_value(gw.url, "tokenpulse_gateway_client_disconnects_total")
    cancelled = fake.cancelled
    body = {"model": "gen", "prompt": "p", "max_tokens": 16, "stream": True}
    with pytest.raises(httpx.ReadTimeout):  # hangs up while the first chunk runs
        httpx.post(f"{gw.url}/v1/completions", headers=auth(keys["demo"]), json=body, timeout=0.2)
    time.sleep(1.0)
    assert fake.cancelled >= cancelled + 1  # (an earlier test's late call may land here too)
    assert metric_value(gw.url, "tokenpulse_gateway_client_disconnects_total") == before + 1


def test_a_smaller_first_chunk_then_full_chunks(tmp_path: Path) -> None:
    key = make_keys_file(tmp_path / "keys.json", demo={})["demo"]
    state = FakeState(outputs={"p": b"abcdefghij"})
    with (
        FakeContinue(state) as up,
        running_gateway(
            up.url, tmp_path / "keys.json", stream_first_chunk_tokens=2, stream_chunk_tokens=4
        ) as gw,
    ):
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0)
        stream = client.completions.create(model="gen", prompt="p", max_tokens=16, stream=True)
        assert [c.choices[0].text for c in stream] == ["ab", "cdef", "ghij"]


def test_a_version_exported_before_streaming_answers_400_and_unary_still_works(
    served, fake
) -> None:
    gw, _, keys = served
    fake.state.no_continue = True
    body = {"model": "gen", "prompt": "p", "max_tokens": 8, "stream": True}
    resp = httpx.post(f"{gw.url}/v1/completions", headers=auth(keys["demo"]), json=body)
    # 400, not 501: the openai SDK retries a 5xx, and this cannot succeed on a retry
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "stream"
    assert "re-export it to stream" in resp.json()["error"]["message"]
    unary = httpx.post(
        f"{gw.url}/v1/completions", headers=auth(keys["demo"]), json={**body, "stream": False}
    )
    assert unary.status_code == 200


def test_the_breaker_and_shedding_apply_per_stream_with_unary_status_codes(
    tmp_path: Path,
) -> None:
    key = make_keys_file(tmp_path / "keys.json", demo={})["demo"]
    # five `continue` calls of 0.5 s (8 tokens, then 32 at a time): the first stream holds the
    # slot for 2.5 s, long enough for a busy machine's second request to reach the gateway
    state = FakeState(outputs={"p": b"x" * 120}, delay_s=0.5)
    body = {"model": "gen", "prompt": "p", "max_tokens": 120, "stream": True}
    kw = {"headers": auth(key), "json": body, "timeout": 10}
    with (
        FakeContinue(state) as up,
        running_gateway(
            up.url, tmp_path / "keys.json", max_concurrency=1, max_queue=0,
            breaker_failure_threshold=2, breaker_open_s=60,
        ) as gw,
    ):  # fmt: skip
        url = f"{gw.url}/v1/completions"
        with httpx.stream("POST", url, **kw) as first:  # holds the only slot
            assert first.status_code == 200
            shed = httpx.post(url, **kw)
            assert shed.status_code == 503 and shed.json()["error"]["code"] == "overloaded"
        state.delay_s, state.fail_from_call = 0.0, 1
        # the first stream's slot is free once the gateway saw it leave: its upstream call in
        # flight ends first, which a loaded machine may take seconds over
        deadline = time.monotonic() + 30
        while metric_value(gw.url, "tokenpulse_gateway_in_flight_requests") != 0:
            assert time.monotonic() < deadline, "the gateway never saw the first stream leave"
            time.sleep(0.05)
        for _ in range(2):
            failed = httpx.post(url, **kw)
            assert failed.status_code == 502
        opened = httpx.post(url, **kw)
        assert opened.status_code == 503 and opened.json()["error"]["code"] == "circuit_open"
        assert "Retry-After" in opened.headers


def test_streams_refused_before_they_start_count_as_streams(served, fake) -> None:
    gw, _, keys = served
    name = "tokenpulse_gateway_requests_by_mode_total"
    body = {"model": "gen", "prompt": "p", "max_tokens": 8, "stream": True}
    refused = [  # (body, extra headers, status): each refused before its first chunk
        ({**body, "model": "nope"}, {}, 404),  # after parsing: no such model
        (body, {"X-Request-Timeout": "-1"}, 400),  # after parsing: a bad deadline header
        ({**body, "max_tokens": -1}, {}, 400),  # while parsing: an invalid parameter
    ]
    for payload, extra, status in refused:
        stream, unary = (
            metric_value(gw.url, name, mode="stream"),
            metric_value(gw.url, name, mode="unary"),
        )
        resp = httpx.post(
            f"{gw.url}/v1/completions", headers={**auth(keys["demo"]), **extra}, json=payload
        )
        assert resp.status_code == status, resp.text
        assert metric_value(gw.url, name, mode="stream") == stream + 1, payload
        assert metric_value(gw.url, name, mode="unary") == unary, payload
    # the same refusals without `stream` (or with a body that is no JSON) stay unary
    for payload in (
        {**body, "stream": False, "max_tokens": -1},
        {**body, "model": "nope", "stream": False},
    ):
        unary = metric_value(gw.url, name, mode="unary")
        resp = httpx.post(f"{gw.url}/v1/completions", headers=auth(keys["demo"]), json=payload)
        assert (
            resp.status_code in (400, 404) and metric_value(gw.url, name, mode="unary") == unary + 1
        )
    unary = metric_value(gw.url, name, mode="unary")
    resp = httpx.post(f"{gw.url}/v1/completions", headers=auth(keys["demo"]), content=b"{not json")
    assert resp.status_code == 400 and metric_value(gw.url, name, mode="unary") == unary + 1


def test_a_refusal_after_the_first_byte_ends_the_stream_as_a_server_error(served, fake) -> None:
    gw, _, keys = served
    fake.state.outputs["p"] = b"v" * 32
    fake.state.reject_from_call = fake.calls["continue"] + 2  # the second chunk is refused
    name = "tokenpulse_gateway_requests_total"
    before = {c: metric_value(gw.url, name, route="completions", code=c) for c in ("200", "502")}
    body = {"model": "gen", "prompt": "p", "max_tokens": 32, "stream": True}
    resp = httpx.post(f"{gw.url}/v1/completions", headers=auth(keys["demo"]), json=body)
    assert resp.status_code == 200
    events = _events(resp)
    assert json.loads(events[0])["choices"][0]["text"] == "vvvv" and events[-1] == "[DONE]"
    err = json.loads(events[-2])["error"]
    assert (err["code"], err["type"]) == ("upstream_rejected", "server_error")
    # counted as what it is, a server error, like any other failure after the first byte
    after = {c: metric_value(gw.url, name, route="completions", code=c) for c in ("200", "502")}
    assert after == {"200": before["200"], "502": before["502"] + 1}


def test_a_refused_stream_is_a_502_and_opens_the_breaker(tmp_path: Path) -> None:
    key = make_keys_file(tmp_path / "keys.json", demo={})["demo"]
    state = FakeState(outputs={"p": b"x" * 16}, reject_from_call=1)
    body = {"model": "gen", "prompt": "p", "max_tokens": 16, "stream": True}
    kw = {"headers": auth(key), "json": body, "timeout": 10}
    with (
        FakeContinue(state) as up,
        running_gateway(
            up.url, tmp_path / "keys.json", breaker_failure_threshold=2, breaker_open_s=60
        ) as gw,
    ):
        url = f"{gw.url}/v1/completions"
        for _ in range(2):
            refused = httpx.post(url, **kw)
            assert refused.status_code == 502
            assert refused.json()["error"]["code"] == "upstream_rejected"
        opened = httpx.post(url, **kw)
        assert opened.status_code == 503 and opened.json()["error"]["code"] == "circuit_open"
        name = "tokenpulse_gateway_requests_total"
        assert metric_value(gw.url, name, route="completions", code="502") == 2
        assert up.calls["continue"] == 2  # the open breaker called nothing


def test_a_version_without_continue_stays_a_400_that_leaves_the_breaker_closed(
    tmp_path: Path,
) -> None:
    key = make_keys_file(tmp_path / "keys.json", demo={})["demo"]
    body = {"model": "gen", "prompt": "p", "max_tokens": 8, "stream": True}
    with (
        FakeContinue(FakeState(no_continue=True)) as up,
        running_gateway(up.url, tmp_path / "keys.json", breaker_failure_threshold=1) as gw,
    ):
        for _ in range(2):
            resp = httpx.post(f"{gw.url}/v1/completions", headers=auth(key), json=body)
            assert resp.status_code == 400
            assert resp.json()["error"]["code"] == "streaming_unsupported"
        assert metric_value(gw.url, "tokenpulse_gateway_circuit_breaker_state") == 0
        listed = httpx.get(f"{gw.url}/v1/models", headers=auth(key)).json()["data"][0]
        assert listed["tokenpulse"]["streams"] is False  # read from the version's signatures


def test_a_version_from_before_generated_ids_streams_on_its_bytes(tmp_path: Path) -> None:
    """A `continue` without `generated_ids` (an export from before it) gets no ids and steps
    counted in bytes (the stand-in refuses a row with an input its signature lacks); one with
    it gets back the ids of every earlier chunk (the module's stand-in checks them)."""
    key = make_keys_file(tmp_path / "keys.json", demo={})["demo"]
    state = FakeState(outputs={"p": b"The quick brown fox"}, resumes=False)
    body = {"model": "gen", "prompt": "p", "max_tokens": 48, "stream": True}
    with (
        FakeContinue(state) as up,
        running_gateway(
            up.url, tmp_path / "keys.json", stream_chunk_tokens=CHUNK,
            stream_first_chunk_tokens=CHUNK,
        ) as gw,
    ):  # fmt: skip
        resp = httpx.post(f"{gw.url}/v1/completions", headers=auth(key), json=body, timeout=10)
        texts = [json.loads(e)["choices"][0]["text"] for e in _events(resp)[:-1]]
        assert "".join(texts) == "The quick brown fox" and up.calls["continue"] == 5


def test_one_failed_shared_call_is_one_breaker_failure(tmp_path: Path) -> None:
    key = make_keys_file(tmp_path / "keys.json", demo={})["demo"]
    # call 1 carries the first stream alone; the other five queue behind it and share call 2,
    # which fails (as does the first stream's next call): one failure per failed call, not one
    # per stream in it, so 2 failures leave a breaker of threshold 3 closed (6 would open it).
    # The five are sent once call 1 has reached the upstream, which holds each call 1 s: sent
    # with the first at once, two of them once reached the gateway before call 1 left it.
    state = FakeState(outputs={"p": b"x" * 16}, delay_s=1.0, fail_from_call=2)
    body = {"model": "gen", "prompt": "p", "max_tokens": 16, "stream": True}
    with (
        FakeContinue(state) as up,
        running_gateway(
            up.url, tmp_path / "keys.json", breaker_failure_threshold=3, breaker_open_s=60,
            stream_chunk_tokens=CHUNK, stream_first_chunk_tokens=CHUNK,
        ) as gw,
    ):  # fmt: skip
        url = f"{gw.url}/v1/completions"

        def post(_: int) -> httpx.Response:
            return httpx.post(url, headers=auth(key), json=body, timeout=30)

        with ThreadPoolExecutor(6) as pool:
            first = pool.submit(post, 0)
            deadline = time.monotonic() + 30
            while up.calls["continue"] < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            answers = [*pool.map(post, range(5)), first.result()]
        assert up.calls["continue"] <= 3  # the five rode in one call
        assert sorted(a.status_code for a in answers) == [200] + [502] * 5
        assert metric_value(gw.url, "tokenpulse_gateway_circuit_breaker_state") == 0
        state.fail_from_call = None
        again = httpx.post(url, headers=auth(key), json=body, timeout=10)
        assert again.status_code == 200 and "[DONE]" in again.text


def test_a_stream_that_keeps_producing_is_not_cut_by_the_total_deadline(tmp_path: Path) -> None:
    key = make_keys_file(tmp_path / "keys.json", demo={})["demo"]
    state = FakeState(outputs={"p": b"abcdefghijklmnopqrstuvwx"}, delay_s=0.6)  # 6 chunks of 4
    with (
        FakeContinue(state) as up,
        running_gateway(
            up.url, tmp_path / "keys.json", request_timeout_s=2.0,
            stream_chunk_tokens=CHUNK, stream_first_chunk_tokens=CHUNK,
        ) as gw,
    ):  # fmt: skip
        # the SDK's timeout is a read timeout, sent as X-Stainless-Read-Timeout: per read, so a
        # chunk every 0.6 s keeps a 3.6 s stream alive under timeout=2 (and the gateway's 2 s)
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0, timeout=2)
        started = time.perf_counter()
        stream = client.completions.create(model="gen", prompt="p", max_tokens=24, stream=True)
        text = "".join(c.choices[0].text for c in stream)
        assert text == "abcdefghijklmnopqrstuvwx" and time.perf_counter() - started > 3
        # a chunk slower than the idle deadline still ends the stream
        state.delay_s = 2.5
        with pytest.raises((openai.APIError, openai.APITimeoutError)):
            list(client.completions.create(model="gen", prompt="p", max_tokens=24, stream=True))
