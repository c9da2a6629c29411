"""The prompt window: a prompt the model cannot hold is refused unless truncation is asked for."""

from __future__ import annotations

import pytest

from serving.gateway.errors import BadRequest
from serving.gateway.jobs import Limits, fit_prompts

LIMITS = Limits(
    max_prompt_chars=16_384,
    max_prompts=16,
    max_new_tokens_limit=512,
    default_max_new_tokens=16,
    default_model="gen",
    context_window_tokens=128,
)


def test_a_prompt_longer_than_the_window_is_refused_with_both_lengths() -> None:
    with pytest.raises(BadRequest) as caught:
        fit_prompts(["x" * 1200], 16, LIMITS, None)
    message = caught.value.message
    assert message.startswith("This model's maximum context length is 128 tokens.")
    assert "your prompt has 1200 tokens" in message
    assert "at most 111 fit" in message
    assert caught.value.status == 400 and caught.value.param == "prompt"


@pytest.mark.parametrize(
    ("max_new", "fits"),
    [(16, 111), (1, 126), (64, 63), (500, 63)],  # room for the output is capped at half the window
)
def test_the_boundary_follows_the_model_rule(max_new: int, fits: int) -> None:
    assert fit_prompts(["y" * fits], max_new, LIMITS, None) == ["y" * fits]
    with pytest.raises(BadRequest, match=f"has {fits + 1} tokens"):
        fit_prompts(["y" * (fits + 1)], max_new, LIMITS, None)


def test_tokens_are_utf8_bytes() -> None:
    with pytest.raises(BadRequest, match="has 112 tokens"):
        fit_prompts(["é" * 56], 16, LIMITS, None)


def test_truncation_only_when_asked() -> None:
    long = "a" * 1000 + "the end"
    assert fit_prompts([long], 16, LIMITS, -1) == [long]  # the model keeps the end
    assert fit_prompts([long], 16, LIMITS, 7) == ["the end"]
    # a multi-byte character cut in half at the start is dropped, not mangled
    assert fit_prompts(["ab€cd"], 16, LIMITS, 4) == ["cd"]
    with pytest.raises(BadRequest, match="has 500 tokens"):
        fit_prompts([long], 16, LIMITS, 500)  # keeping 500 still does not fit


def test_a_samples_params_carry_the_stop_sequences_when_sent() -> None:
    from serving.gateway.jobs import Job

    job = Job(model="gen", prompts=["p"], max_new_tokens=8, temperature=0.5, top_k=40,
              top_p=0.9, seed=1, stop=("\n\n", "User:"))  # fmt: skip
    assert job.params()["stop"] == ["\n\n", "User:"]
    job.stop = ()
    assert "stop" not in job.params()
