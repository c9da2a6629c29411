"""The one rule for fields the model cannot honour: off values pass, the rest is a 400 naming it."""

from __future__ import annotations

import pytest

from serving.gateway.errors import BadRequest
from serving.gateway.fields import INERT, check_inert


@pytest.mark.parametrize(
    "extra",
    [
        {"presence_penalty": 0},
        {"presence_penalty": 0.0, "frequency_penalty": None},
        {"n": 1, "best_of": 1.0},
        {"tools": None, "tool_choice": "none", "parallel_tool_calls": True},
        {"response_format": {"type": "text"}, "logit_bias": {}},
        {"logprobs": False, "top_logprobs": 0},
        {"min_p": 0, "repetition_penalty": 1.0, "min_tokens": 0},
        {"metadata": {"a": "b"}, "store": True, "service_tier": "flex", "safety_identifier": "x"},
    ],
)
def test_values_that_change_nothing_pass(extra: dict) -> None:
    check_inert(extra)


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"presence_penalty": 0.1}, "presence_penalty"),
        ({"presence_penalty": False}, "presence_penalty"),  # JSON false is not the number 0
        ({"logprobs": 0}, "logprobs"),  # completions' 0 asks for the sampled token's logprob
        ({"logit_bias": None, "n": 2}, "n"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"min_tokens": 5}, "min_tokens"),
        ({"tools": [{"type": "function"}]}, "tools"),
        ({"totally_new": 1}, "totally_new"),
    ],
)
def test_a_value_that_would_change_the_result_is_a_400_naming_the_field(
    extra: dict, param: str
) -> None:
    with pytest.raises(BadRequest) as caught:
        check_inert(extra)
    assert caught.value.param == param and caught.value.status == 400
    assert param in caught.value.message


def test_the_refusal_says_what_is_accepted() -> None:
    with pytest.raises(BadRequest, match=r"min_tokens: 5 is not supported: .*stopping early.*"
                       r"\(accepted: null, 0, or leave it out\)"):  # fmt: skip
        check_inert({"min_tokens": 5})


def test_the_schema_lists_the_off_values() -> None:
    assert INERT["presence_penalty"].schema()["enum"] == [None, 0]
    assert "enum" not in INERT["metadata"].schema()


def test_a_huge_stop_sequence_is_a_400_not_a_per_step_cost() -> None:
    """Found probing from outside: a 100 000-character `stop` was accepted and would be compared
    with every row's tail at every decode step inside the model."""
    from serving.gateway.protocol import MAX_STOP_BYTES, stops

    assert stops("x" * MAX_STOP_BYTES) == ("x" * MAX_STOP_BYTES,)
    with pytest.raises(BadRequest) as caught:
        stops(["\n", "好" * 100])  # 300 UTF-8 bytes
    assert caught.value.param == "stop" and caught.value.status == 400
