"""The prompt window: a prompt the model cannot hold is refused unless truncation is asked for.

`fit_tokens` checks a prompt's count, which for a byte model is the byte bound (`_byte_model`);
`fit_or_recount` decides at parse time whether the byte bound settles it, and `Job.settle`
settles the rest on the counts the model gives (`Pipeline.settle_window`)."""

from __future__ import annotations

import pytest

from serving.gateway.errors import BadRequest, ContextLengthExceeded
from serving.gateway.jobs import (
    Job,
    Limits,
    Recount,
    byte_bound,
    cut_prompts,
    fit_or_recount,
    fit_tokens,
)

LIMITS = Limits(
    max_prompt_chars=16_384,
    max_prompts=16,
    max_new_tokens_limit=512,
    default_max_new_tokens=16,
    default_model="gen",
    context_window_tokens=128,
)


def _byte_model(
    prompts: list[str],
    max_new: int | None,
    limits: Limits,
    truncate: int | None,
    where: str = "prompt",
) -> tuple[list[str], int]:
    """What a byte model (its count is the byte bound) runs: the cut prompts, the new tokens."""
    cut = cut_prompts(prompts, truncate)
    return cut, fit_tokens(max(byte_bound(p) for p in cut), max_new, limits, truncate, where)


def _fit(prompts: list[str], max_new: int, limits: Limits, truncate: int | None) -> list[str]:
    return _byte_model(prompts, max_new, limits, truncate)[0]


def test_a_prompt_longer_than_the_window_is_refused_in_vllms_words() -> None:
    with pytest.raises(ContextLengthExceeded) as caught:
        _fit(["x" * 1200], 16, LIMITS, None)
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
        assert _fit(["y" * fits], max_new, LIMITS, None) == ["y" * fits]
    with pytest.raises(ContextLengthExceeded, match=f"{fits + 2} in the prompt"):
        _fit(["y" * (fits + 1)], max_new, LIMITS, None)


def test_max_tokens_beyond_the_window_is_refused_whatever_the_prompt() -> None:
    with pytest.raises(ContextLengthExceeded, match="you requested 502 tokens"):
        _fit(["y"], 500, LIMITS, None)


def test_without_a_length_the_rest_of_the_window_up_to_the_cap() -> None:
    assert _byte_model(["y" * 27], None, LIMITS, None) == (["y" * 27], 100)
    capped = Limits(**{**vars(LIMITS), "max_new_tokens_limit": 32})
    assert _byte_model(["y" * 27], None, capped, None) == (["y" * 27], 32)
    with pytest.raises(ContextLengthExceeded, match="your request has 128 input tokens"):
        _byte_model(["y" * 127], None, LIMITS, None, where="messages")


def test_tokens_are_utf8_bytes() -> None:
    with pytest.raises(BadRequest, match="113 in the prompt"):
        _fit(["é" * 56], 16, LIMITS, None)


def test_truncation_only_when_asked() -> None:
    long = "a" * 1000 + "the end"
    assert _fit([long], 16, LIMITS, -1) == [long]  # the model keeps the end
    assert _fit([long], 16, LIMITS, 7) == ["the end"]
    # a multi-byte character cut in half at the start is dropped, not mangled
    assert _fit(["ab€cd"], 16, LIMITS, 4) == ["cd"]
    with pytest.raises(BadRequest, match="501 in the prompt"):
        _fit([long], 16, LIMITS, 500)  # keeping 500 still does not fit


def test_minus_one_refuses_a_completion_the_model_would_cut() -> None:
    long = "a" * 1000
    assert _fit([long], 64, LIMITS, -1) == [long]  # half the window: the model keeps it
    with pytest.raises(ContextLengthExceeded, match="at most 64 new tokens"):
        _fit([long], 65, LIMITS, -1)
    assert _fit(["short"], 100, LIMITS, -1) == ["short"]  # no cut needed: fits whole
    assert _byte_model([long], None, LIMITS, -1) == ([long], 64)


def _job(prompt: str, recount: Recount | None, max_new: int, truncate: int | None = None) -> Job:
    return Job(model="gen", prompts=[prompt], max_new_tokens=max_new, temperature=1.0, top_k=0,
               top_p=1.0, seed=1, truncate_prompt_tokens=truncate, recount=recount)  # fmt: skip


def test_a_short_prompt_is_settled_by_the_byte_bound_at_parse_time() -> None:
    assert fit_or_recount(["y" * 111], 16, LIMITS, None) == (["y" * 111], 16, None)
    capped = Limits(**{**vars(LIMITS), "max_new_tokens_limit": 32})
    assert fit_or_recount(["y" * 27], None, capped, None) == (["y" * 27], 32, None)


def test_a_prompt_over_the_window_in_bytes_waits_for_the_models_count() -> None:
    prompt = "y" * 300  # 301 tokens by the byte bound; a subword model's count can fit 128
    cut, most, recount = fit_or_recount([prompt], 16, LIMITS, None)
    assert (cut, most) == ([prompt], 16) and recount == Recount(16, "prompt", LIMITS)
    job = _job(prompt, recount, most)
    job.settle([101])  # the model's 100 tokens and its start token
    assert job.max_new_tokens == 16 and job.recount is None
    job = _job(prompt, recount, most)
    with pytest.raises(ContextLengthExceeded) as caught:
        job.settle([120])
    assert caught.value.status == 400 and caught.value.param == "prompt"
    assert caught.value.message.startswith(
        "This model's maximum context length is 128 tokens. However, you requested 136 tokens "
        "(120 in the prompt, 16 in the completion)."
    )


def test_chat_without_a_length_gets_the_rest_of_the_window_the_models_count_leaves() -> None:
    prompt = "y" * 100  # by bytes 27 tokens are left; fewer tokens leave more
    cut, most, recount = fit_or_recount([prompt], None, LIMITS, None, where="messages")
    assert most == 127 and recount == Recount(None, "messages", LIMITS)  # reserved: the most
    job = _job(prompt, recount, most)
    job.settle([41])
    assert job.max_new_tokens == 128 - 41
    with pytest.raises(ContextLengthExceeded, match="your request has 128 input tokens"):
        _job(prompt, recount, most).settle([128])


def test_a_length_no_prompt_can_fit_beside_is_refused_on_the_models_count() -> None:
    cut, most, recount = fit_or_recount(["y"], 500, LIMITS, None)
    assert most == 500 and recount is not None
    with pytest.raises(ContextLengthExceeded, match=r"you requested 502 tokens \(2 in the"):
        _job("y", recount, most).settle([2])


def test_truncation_to_k_cuts_at_parse_time_and_minus_one_settles_on_the_count() -> None:
    long = "a" * 1000 + "the end"
    assert fit_or_recount([long], 16, LIMITS, 7) == (["the end"], 16, None)
    cut, most, recount = fit_or_recount([long], 100, LIMITS, -1)  # bytes: the model must cut
    assert cut == [long] and recount is not None
    job = _job(long, recount, most, -1)
    job.settle([20])  # it need not: 100 new tokens fit beside the prompt's 20
    assert job.max_new_tokens == 100
    with pytest.raises(ContextLengthExceeded, match="at most 64 new tokens"):
        _job(long, recount, most, -1).settle([300])


def test_a_samples_params_carry_the_stop_sequences_when_sent() -> None:
    job = Job(model="gen", prompts=["p"], max_new_tokens=8, temperature=0.5, top_k=40,
              top_p=0.9, seed=1, stop=("\n\n", "User:"))  # fmt: skip
    assert job.params()["stop"] == ["\n\n", "User:"]
    job.stop = ()
    assert "stop" not in job.params()
