"""The prompt window: a prompt the model cannot hold is refused unless truncation is asked for."""

from __future__ import annotations

import pytest

from serving.gateway.errors import BadRequest, ContextLengthExceeded
from serving.gateway.jobs import Limits, fit_prompts, fit_window

LIMITS = Limits(
    max_prompt_chars=16_384,
    max_prompts=16,
    max_new_tokens_limit=512,
    default_max_new_tokens=16,
    default_model="gen",
    context_window_tokens=128,
)


def test_a_prompt_longer_than_the_window_is_refused_in_vllms_words() -> None:
    with pytest.raises(ContextLengthExceeded) as caught:
        fit_prompts(["x" * 1200], 16, LIMITS, None)
    assert caught.value.message.startswith(
        "This model's maximum context length is 128 tokens. However, you requested 1217 tokens "
        "(1201 in the prompt, 16 in the completion)."
    )
    assert caught.value.status == 400 and caught.value.param == "prompt"
    assert caught.value.code == "context_length_exceeded"


@pytest.mark.parametrize(
    ("max_new", "fits"),
    # prompt bytes + a start token + max_tokens <= window: no silent cap of the output any more
    # (the old rule let 500 new tokens through beside a 63-byte prompt and the model cut them)
    [(16, 111), (1, 126), (64, 63), (100, 27), (127, 0)],
)
def test_prompt_and_completion_must_fit_the_window_together(max_new: int, fits: int) -> None:
    if fits:  # (127 new tokens leave no room for a prompt at all)
        assert fit_prompts(["y" * fits], max_new, LIMITS, None) == ["y" * fits]
    with pytest.raises(ContextLengthExceeded, match=f"{fits + 2} in the prompt"):
        fit_prompts(["y" * (fits + 1)], max_new, LIMITS, None)


def test_max_tokens_beyond_the_window_is_refused_whatever_the_prompt() -> None:
    with pytest.raises(ContextLengthExceeded, match="you requested 502 tokens"):
        fit_prompts(["y"], 500, LIMITS, None)


def test_without_a_length_the_rest_of_the_window_up_to_the_cap() -> None:
    assert fit_window(["y" * 27], None, LIMITS, None) == (["y" * 27], 100)
    capped = Limits(**{**vars(LIMITS), "max_new_tokens_limit": 32})
    assert fit_window(["y" * 27], None, capped, None) == (["y" * 27], 32)
    with pytest.raises(ContextLengthExceeded, match="your request has 128 input tokens"):
        fit_window(["y" * 127], None, LIMITS, None, where="messages")


def test_tokens_are_utf8_bytes() -> None:
    with pytest.raises(BadRequest, match="113 in the prompt"):
        fit_prompts(["é" * 56], 16, LIMITS, None)


def test_truncation_only_when_asked() -> None:
    long = "a" * 1000 + "the end"
    assert fit_prompts([long], 16, LIMITS, -1) == [long]  # the model keeps the end
    assert fit_prompts([long], 16, LIMITS, 7) == ["the end"]
    # a multi-byte character cut in half at the start is dropped, not mangled
    assert fit_prompts(["ab€cd"], 16, LIMITS, 4) == ["cd"]
    with pytest.raises(BadRequest, match="501 in the prompt"):
        fit_prompts([long], 16, LIMITS, 500)  # keeping 500 still does not fit


def test_minus_one_refuses_a_completion_the_model_would_cut() -> None:
    long = "a" * 1000
    assert fit_prompts([long], 64, LIMITS, -1) == [long]  # half the window: the model keeps it
    with pytest.raises(ContextLengthExceeded, match="at most 64 new tokens"):
        fit_prompts([long], 65, LIMITS, -1)
    assert fit_prompts(["short"], 100, LIMITS, -1) == ["short"]  # no cut needed: fits whole
    assert fit_window([long], None, LIMITS, -1) == ([long], 64)


def test_a_samples_params_carry_the_stop_sequences_when_sent() -> None:
    from serving.gateway.jobs import Job

    job = Job(model="gen", prompts=["p"], max_new_tokens=8, temperature=0.5, top_k=40,
              top_p=0.9, seed=1, stop=("\n\n", "User:"))  # fmt: skip
    assert job.params()["stop"] == ["\n\n", "User:"]
    job.stop = ()
    assert "stop" not in job.params()
