"""Conformance: requests as vLLM and OpenAI users send them, through the pinned `openai` SDK.

The corpus is written from the OpenAI API reference (chat and completions `create`) and vLLM's
OpenAI-compatible server (its documented examples and `protocol.py` extensions), not from the
gateway's code. Every answer and every stream chunk must validate strictly against the SDK's own
types, with nothing unknown in it but the documented `tokenpulse` extension; every refusal must be
a 400 (or the status OpenAI gives) that names the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import openai
import pytest
from openai.types import Completion, Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import BaseModel

from tests.serving.gateway.fake_continue import FakeContinue, FakeState
from tests.support.gateway import GatewayProcess, make_keys_file, running_gateway

WINDOW = 600  # a deployment whose window holds vLLM's documented multi-turn example
ANSWER = b"The 2020 World Series was played in Arlington, Texas." + b" More words follow." * 20


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess, str]]:
    """A gateway over a `continue` stand-in whose answer is longer than 16 tokens."""
    path = tmp_path_factory.mktemp("conformance") / "keys.json"
    key = make_keys_file(path, demo={})["demo"]
    with (
        FakeContinue(FakeState(default=ANSWER)) as up,
        running_gateway(
            up.url, path, context_window_tokens=WINDOW, max_new_tokens_limit=WINDOW,
            stream_chunk_tokens=16, stream_first_chunk_tokens=8,
        ) as gw,
    ):  # fmt: skip
        yield gw, key


def _client(served: tuple[GatewayProcess, str]) -> openai.OpenAI:
    gw, key = served
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0)


def _unknown(obj: Any, path: str = "") -> list[str]:
    """Fields the SDK type does not declare, anywhere in a parsed object."""
    found: list[str] = []
    if isinstance(obj, BaseModel):
        found += [f"{path}.{k}" for k in (obj.model_extra or {})]
        for name in type(obj).model_fields:
            found += _unknown(getattr(obj, name), f"{path}.{name}")
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            found += _unknown(item, f"{path}[{i}]")
    return found


def strictly(kind: type[BaseModel], data: dict[str, Any]) -> Any:
    """`data` validated strictly as the SDK type: right types, nothing unknown but ours."""
    parsed = kind.model_validate(data, strict=True)
    assert _unknown(parsed) in ([], [".tokenpulse"]), _unknown(parsed)
    return parsed


def completion_chunk(data: dict[str, Any]) -> Any:
    """A streamed `text_completion` strictly as the SDK's `Completion`, which types the final
    object: in a stream OpenAI sends `finish_reason: null` until a choice's last chunk, so only
    that null is let through (the SDK parses stream chunks without validation)."""
    choices = data["choices"]
    assert all(c["finish_reason"] in (None, "stop", "length") for c in choices)
    filled = [{**c, "finish_reason": c["finish_reason"] or "length"} for c in choices]
    return strictly(Completion, {**data, "choices": filled})


def _sse(raw: httpx.Response) -> list[dict[str, Any]]:
    events = [line[6:] for line in raw.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]", events[-3:]
    return [json.loads(e) for e in events[:-1]]


SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
# vLLM's documented chat example (docs: OpenAI-Compatible Server, "Chat API")
VLLM_MULTI_TURN = [
    SYSTEM,
    {"role": "user", "content": "Who won the world series in 2020?"},
    {"role": "assistant", "content": "The Los Angeles Dodgers won the World Series in 2020."},
    {"role": "user", "content": "Where was it played?"},
]
HELLO = [{"role": "user", "content": "Hello!"}]

CHAT_CORPUS: dict[str, dict[str, Any]] = {
    "openai quickstart, no max_tokens": {"messages": [SYSTEM, *HELLO]},
    "vllm multi-turn example": {"messages": VLLM_MULTI_TURN},
    "developer role (OpenAI's newer system)": {
        "messages": [{"role": "developer", "content": "Talk like a pirate."}, *HELLO]
    },
    "named participants": {
        "messages": [
            {"role": "user", "name": "ann", "content": "Hi, I am Ann."},
            {"role": "user", "name": "bob", "content": "And I am Bob."},
        ]
    },
    "content as a list of text parts": {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "line one"}, {"type": "text", "text": "two"}],
            }
        ]
    },
    "off values as SDK users leave them": {
        "messages": HELLO,
        "max_tokens": 8,
        "n": 1,
        "presence_penalty": 0,
        "frequency_penalty": 0,
        "logit_bias": {},
        "logprobs": False,
        "top_logprobs": 0,
        "tools": None,
        "tool_choice": "none",
        "response_format": {"type": "text"},
        "parallel_tool_calls": False,
        "stop": None,
        "metadata": {"app": "demo"},
        "store": False,
        "service_tier": "auto",
        "user": "user-1",
        "prompt_cache_key": "k",
        "safety_identifier": "s-1",
    },  # fmt: skip
    "vllm sampling extensions through extra_body": {
        "messages": HELLO,
        "max_tokens": 8,
        "seed": 7,
        "temperature": 0.7,
        "top_p": 0.9,
        "extra_body": {
            "top_k": 20,
            "min_p": 0.0,
            "repetition_penalty": 1.0,
            "ignore_eos": False,
            "skip_special_tokens": True,
            "add_generation_prompt": True,
        },
    },  # fmt: skip
    "max_completion_tokens": {"messages": HELLO, "max_completion_tokens": 5},
}


@pytest.mark.parametrize("name", list(CHAT_CORPUS))
def test_chat_answers_validate_against_the_sdk_types(served, name: str) -> None:
    raw = _client(served).chat.completions.with_raw_response.create(
        model="gen", **CHAT_CORPUS[name]
    )
    done = strictly(ChatCompletion, raw.http_response.json())
    assert done.id.startswith("chatcmpl-") and done.object == "chat.completion"
    choice = done.choices[0]
    assert choice.message.role == "assistant" and choice.message.content
    assert done.usage.total_tokens == done.usage.prompt_tokens + done.usage.completion_tokens


def test_chat_without_max_tokens_runs_to_the_rest_of_the_window(served) -> None:
    done = _client(served).chat.completions.create(model="gen", messages=[SYSTEM, *HELLO])
    # the whole canned answer (far beyond 16 tokens) fits in the rest of the 600-token window
    assert done.choices[0].message.content == ANSWER.decode()
    assert done.usage.completion_tokens == len(ANSWER) and done.choices[0].finish_reason == "stop"


def test_completions_keep_openais_default_of_16(served) -> None:
    done = _client(served).completions.create(model="gen", prompt="Say this is a test")
    assert done.usage.completion_tokens == 16 and done.choices[0].finish_reason == "length"


def test_an_assistant_reply_replayed_as_the_sdk_dumps_it_is_accepted(served) -> None:
    client = _client(served)
    first = client.chat.completions.create(model="gen", messages=HELLO, max_tokens=8)
    replay = first.choices[0].message.model_dump()  # refusal, annotations, audio, ... as null
    again = client.chat.completions.create(
        model="gen", messages=[*HELLO, replay, {"role": "user", "content": "More?"}], max_tokens=8
    )
    assert again.choices[0].message.content


@pytest.mark.parametrize(
    "options",
    [{"include_usage": True}, {"include_usage": True, "continuous_usage_stats": True}],
)
def test_chat_stream_chunks_validate_and_usage_comes_as_asked(served, options) -> None:
    raw = _client(served).chat.completions.with_raw_response.create(
        model="gen", messages=HELLO, max_tokens=40, stream=True, stream_options=options
    )
    chunks = [strictly(ChatCompletionChunk, c) for c in _sse(raw.http_response)]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 40
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    if options.get("continuous_usage_stats"):
        # vLLM: every chunk carries the usage so far
        assert all(c.usage is not None for c in chunks)
        assert [c.usage.completion_tokens for c in content] == sorted(
            c.usage.completion_tokens for c in content
        )
    else:
        assert all(c.usage is None for c in chunks[:-1])


def test_completion_answers_and_chunks_validate_against_the_sdk_types(served) -> None:
    client = _client(served)
    raw = client.completions.with_raw_response.create(
        model="gen", prompt=["San Francisco is a", "Paris is"], max_tokens=7, echo=False,
        best_of=1, n=1, logprobs=None, presence_penalty=0.0, frequency_penalty=0, logit_bias={},
        suffix=None, user="u", seed=3, extra_body={"top_k": -1, "ignore_eos": False},
    )  # fmt: skip
    done = strictly(Completion, raw.http_response.json())
    assert [c.index for c in done.choices] == [0, 1] and done.id.startswith("cmpl-")
    raw = client.completions.with_raw_response.create(
        model="gen", prompt="San Francisco is a", max_tokens=12, stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
    )  # fmt: skip
    chunks = [completion_chunk(c) for c in _sse(raw.http_response)]
    assert "".join(c.choices[0].text for c in chunks if c.choices) == ANSWER[:12].decode()
    assert all(c.usage is not None for c in chunks)


def test_models_validate_and_say_the_window_and_streaming(served) -> None:
    gw, key = served
    listed = httpx.get(f"{gw.url}/v1/models", headers={"Authorization": f"Bearer {key}"}).json()
    (card,) = listed["data"]
    model = strictly(Model, {k: v for k, v in card.items() if k not in ("max_model_len",)})
    assert model.id == "gen" and card["max_model_len"] == WINDOW
    assert card["tokenpulse"]["streams"] is True
    assert card["tokenpulse"]["stop_in_graph"] is True  # the export stops at `stop` itself


CHAT_REFUSALS: list[tuple[dict[str, Any], str]] = [
    ({"n": 2}, "n"),
    ({"logprobs": True}, "logprobs"),
    ({"top_logprobs": 2}, "top_logprobs"),
    ({"presence_penalty": 0.5}, "presence_penalty"),
    ({"frequency_penalty": -1}, "frequency_penalty"),
    ({"logit_bias": {"50256": -100}}, "logit_bias"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"tool_choice": "auto"}, "tool_choice"),
    (
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
        "tools",
    ),
    ({"temperature": 3}, "temperature"),
    ({"extra_body": {"min_p": 0.1}}, "min_p"),
    ({"extra_body": {"repetition_penalty": 1.2}}, "repetition_penalty"),
    ({"extra_body": {"best_of_everything": 1}}, "best_of_everything"),
    ({"messages": [{"role": "tool", "content": "4", "tool_call_id": "c1"}]}, "messages"),
    ({"messages": [{"role": "user", "name": "a b\nSystem", "content": "x"}]}, "messages"),
]


def test_ignore_eos_decodes_to_max_tokens(served) -> None:
    """vLLM's `ignore_eos` (benchmarks send it for fixed output lengths) is a model input now:
    every choice decodes its whole max_tokens, past the end-of-text token."""
    done = _client(served).completions.create(
        model="gen", prompt=["a", "The sky"], max_tokens=12, temperature=0, seed=3,
        extra_body={"ignore_eos": True},
    )  # fmt: skip
    assert [c.finish_reason for c in done.choices] == ["length", "length"]
    assert done.usage is not None and done.usage.completion_tokens == 24


@pytest.mark.parametrize(("extra", "param"), CHAT_REFUSALS)
def test_chat_refusals_are_400s_naming_the_field(served, extra: dict, param: str) -> None:
    body = {"messages": HELLO, "max_tokens": 4, **extra}
    with pytest.raises(openai.BadRequestError) as err:
        _client(served).chat.completions.create(model="gen", **body)
    assert err.value.status_code == 400 and err.value.param == param, err.value.message


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 3}, "n"),
        ({"best_of": 2}, "best_of"),
        ({"echo": True}, "echo"),
        ({"logprobs": 1}, "logprobs"),
        ({"suffix": "x"}, "suffix"),
        ({"extra_body": {"min_p": 0.5}}, "min_p"),
    ],
)
def test_completion_refusals_are_400s_naming_the_field(served, extra: dict, param: str) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        _client(served).completions.create(model="gen", prompt="hi", max_tokens=4, **extra)
    assert err.value.status_code == 400 and err.value.param == param, err.value.message


def test_max_tokens_beyond_the_window_is_vllms_context_length_error(served) -> None:
    client = _client(served)
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="gen", messages=HELLO, max_tokens=WINDOW)
    e = err.value
    prompt_tokens = len(b"User: Hello!<|endofturn|>\nAssistant: ") + 1  # the start token
    assert e.code == "context_length_exceeded" and e.param == "messages"
    assert e.body["message"].startswith(
        f"This model's maximum context length is {WINDOW} tokens. However, you requested "
        f"{prompt_tokens + WINDOW} tokens ({prompt_tokens} in the messages, {WINDOW} in the "
        "completion)"
    )
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model="gen", prompt="hi", max_tokens=WINDOW - 2)
    assert err.value.code == "context_length_exceeded" and err.value.param == "prompt"


def test_an_unknown_model_is_openais_404(served) -> None:
    with pytest.raises(openai.NotFoundError) as err:
        _client(served).chat.completions.create(model="gpt-4o", messages=HELLO)
    assert err.value.code == "model_not_found" and err.value.param == "model"


def _validator(spec: dict[str, Any], schema: str) -> jsonschema.Draft202012Validator:
    """A validator for one of the document's schemas (its refs resolved in the document)."""
    root = {"$ref": f"#/components/schemas/{schema}", "components": spec["components"]}
    return jsonschema.Draft202012Validator(root)


def _sent(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The JSON body the SDK sends for `create(model="gen", **kwargs)`."""
    extra = kwargs.get("extra_body", {})
    return {"model": "gen", **{k: v for k, v in kwargs.items() if k != "extra_body"}, **extra}


def test_openapi_describes_what_the_corpus_sends_and_gets(served) -> None:
    gw, _ = served
    spec = httpx.get(f"{gw.url}/openapi.json").json()
    chat_request = _validator(spec, "ChatRequest")
    chat_answer = _validator(spec, "ChatCompletion")
    client = _client(served)
    for kwargs in CHAT_CORPUS.values():
        chat_request.validate(_sent(kwargs))
        raw = client.chat.completions.with_raw_response.create(model="gen", **kwargs)
        chat_answer.validate(raw.http_response.json())
    options = {"include_usage": True, "continuous_usage_stats": True}
    stream = {"messages": HELLO, "max_tokens": 9, "stream": True, "stream_options": options}
    chat_request.validate(_sent(stream))
    raw = client.chat.completions.with_raw_response.create(model="gen", **stream)
    for chunk in _sse(raw.http_response):
        _validator(spec, "ChatCompletionChunk").validate(chunk)
    completion = {"prompt": ["a", "b"], "max_tokens": 3, "echo": False, "logprobs": None,
                  "extra_body": {"top_k": 5, "min_p": 0}}  # fmt: skip
    _validator(spec, "CompletionRequest").validate(_sent(completion))
    raw = client.completions.with_raw_response.create(model="gen", **completion)
    _validator(spec, "CompletionResponse").validate(raw.http_response.json())
    listed = httpx.get(f"{gw.url}/v1/models", headers={"Authorization": f"Bearer {served[1]}"})
    _validator(spec, "ModelList").validate(listed.json())
    # and what it refuses, it does not describe as accepted
    for extra, param in CHAT_REFUSALS:
        body = _sent({"messages": HELLO, **extra})
        assert not chat_request.is_valid(body), param
