"""The chat template and what /v1/chat/completions refuses (through the parser)."""

from __future__ import annotations

import json

import pytest

from serving.gateway.chat import ChatCompletion, flatten, parse, respond
from serving.gateway.errors import BadRequest
from serving.gateway.jobs import Limits
from tokenpulse.samples import OutputSignals, RequestStats

LIMITS = Limits(
    max_prompt_chars=1000, max_prompts=4, max_new_tokens_limit=64, default_max_new_tokens=16,
    default_model="gen", context_window_tokens=128,
)  # fmt: skip


def _parse(**body: object) -> object:
    return parse(json.dumps({"model": "gen", **body}).encode(), LIMITS)


def test_messages_flatten_by_the_documented_template() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "!"}],
        },
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Bye", "name": "ann"},
    ]
    assert flatten(messages) == (
        "System: Be brief.\nUser: Hi!\nAssistant: Hello.\nUser: Bye\nAssistant:"
    )


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "tool", "content": "1"}]}, "tool messages"),
        ({"messages": [{"role": "function", "content": "1"}]}, "function messages"),
        ({"messages": [{"role": "bot", "content": "1"}]}, "system, user or assistant"),
        ({"messages": [{"role": "user", "content": 5}]}, "string or a list of text parts"),
        ({"messages": [{"role": "user", "content": "x", "audio": {}}]}, "unsupported field"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": []}, "cannot call tools"),
        ({"messages": [{"role": "user", "content": "x"}], "tool_choice": "auto"}, "tools"),
        ({"messages": [{"role": "user", "content": "x"}], "n": 2}, "n must be 1"),
        ({"messages": [{"role": "user", "content": "x"}], "bogus": 1}, "bogus"),
        ({"messages": [{"role": "user", "content": "x" * 200}]}, "maximum context length"),
    ],
)
def test_refusals_are_400_with_a_reason(body: dict, words: str) -> None:
    with pytest.raises(BadRequest, match=words):
        _parse(**body)


def test_parse_takes_max_completion_tokens_and_stream_options() -> None:
    job = _parse(
        messages=[{"role": "user", "content": "x"}], max_completion_tokens=5, stream=True,
        stream_options={"include_usage": True}, stop="\n",
    )  # fmt: skip
    assert job.max_new_tokens == 5 and job.stream and job.include_usage  # type: ignore[attr-defined]
    assert job.prompts == ["User: x\nAssistant:"] and job.stop == ("\n",)  # type: ignore[attr-defined]


def test_the_window_is_enforced_after_templating_and_truncation_keeps_the_end() -> None:
    content = "y" * 110  # fits on its own (128 - 16 - 1), not with the template around it
    with pytest.raises(BadRequest, match="maximum context length"):
        _parse(messages=[{"role": "user", "content": content}])
    job = _parse(messages=[{"role": "user", "content": content}], truncate_prompt_tokens=50)
    assert job.prompts[0].endswith("\nAssistant:") and len(job.prompts[0]) == 50  # type: ignore[attr-defined]


def test_the_unary_answer_validates_against_its_schema() -> None:
    job = _parse(messages=[{"role": "user", "content": "x"}])
    stats = RequestStats(request_id="r", route="chat", model="gen", version="1")
    stats.outputs.append(OutputSignals(5, 3, "stop", False, 0.0, 1.0))
    body = respond(job, ["abc"], stats)  # type: ignore[arg-type]
    checked = ChatCompletion.model_validate_json(body.model_dump_json())
    assert checked.choices[0].message.content == "abc" and checked.usage.total_tokens == 8
