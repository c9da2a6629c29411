"""Sampling decisions: always-keep rules, head rate, per-key caps, strict rules file."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from log_pipeline.sampler import (
    DEFAULT_RULES_FILE,
    REASONS,
    RulesError,
    Sampler,
    SamplingRules,
    load_rules,
)
from log_pipeline.settings import SinkSettings
from log_pipeline.writer import SampleWriter
from tests.log_pipeline.conftest import make_sample
from tokenpulse.samples import OutputSignals, RequestStats, Sample


def _sampler(head_rate: float = 0.0, cap: int = 0, clock: list[float] | None = None) -> Sampler:
    rules = SamplingRules.model_validate(
        {"head_rate": head_rate, "caps": {"per_key_per_minute": cap}}
    )
    now = clock or [0.0]
    return Sampler(rules, rng=random.Random(3), clock=lambda: now[0])


def test_default_rules_file_parses() -> None:
    rules = load_rules(DEFAULT_RULES_FILE)
    assert 0 <= rules.head_rate <= 1
    assert rules.always_keep.canary_labels == ["canary"]


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"status": 503}, "error"),
        ({"total_s": 5.0}, "slow"),
        ({"output": ""}, "low_quality"),
        ({"mean_nll": 9.0}, "low_quality"),
        ({"finish_reason": "length"}, "low_quality"),
        ({"version_label": "canary"}, "canary"),
    ],
)
def test_always_keep(kwargs: dict[str, object], reason: str) -> None:
    sample = make_sample(1, **kwargs)  # type: ignore[arg-type]
    decision = _sampler().decide(sample.stats, max_new_tokens=sample.params["max_new_tokens"])
    assert decision.keep and decision.reasons == (reason,)


def test_ordinary_requests_follow_the_head_rate() -> None:
    sampler = _sampler(head_rate=0.25)
    kept = sum(sampler.decide(make_sample(i).stats).keep for i in range(4000))
    assert 800 < kept < 1200
    assert _sampler().decide(make_sample(1).stats).skipped == "not_sampled"


def test_several_reasons_are_all_listed() -> None:
    d = _sampler().decide(make_sample(1, status=500, total_s=9.0, version_label="canary").stats)
    assert d.reasons == ("error", "slow", "canary")


def test_every_reason_the_sampler_gives_is_in_its_closed_set_in_order() -> None:
    failed = make_sample(1, status=500, total_s=9.0, version_label="canary")
    empty = make_sample(2, total_s=9.0, output="", version_label="canary")
    decisions = [_sampler().decide(s.stats) for s in (failed, empty)]
    decisions.append(_sampler(head_rate=1.0).decide(make_sample(3).stats))
    for d in decisions:
        assert list(d.reasons) == sorted(d.reasons, key=REASONS.index)
    assert {r for d in decisions for r in d.reasons} == set(REASONS)


def test_per_key_cap_per_minute() -> None:
    clock = [0.0]
    sampler = _sampler(head_rate=1.0, cap=3, clock=clock)
    got = [sampler.decide(make_sample(i, key_id="noisy").stats).keep for i in range(5)]
    assert got == [True, True, True, False, False]
    assert sampler.decide(make_sample(9, key_id="quiet").stats).keep
    clock[0] = 61.0
    assert sampler.decide(make_sample(10, key_id="noisy").stats).keep


def test_bad_rules_file_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text("head_rate = 2.0\n")
    with pytest.raises(RulesError, match="head_rate"):
        load_rules(path)
    path.write_text("[always_keep]\nslow = 1\n")
    with pytest.raises(RulesError, match="always_keep.slow"):
        load_rules(path)
    path.write_text("head_rate = \n")
    with pytest.raises(RulesError, match="rules.toml"):
        load_rules(path)


def _finished(
    output_tokens: int, finish_reason: str = "length", truncated_prompt_tokens: int = 0
) -> RequestStats:
    """A request of one output, quick and of ordinary quality."""
    out = OutputSignals(6, output_tokens, finish_reason, False, 0.0, 1.0, truncated_prompt_tokens)
    return RequestStats(request_id="r", route="generate", model="gen", total_s=0.1, outputs=[out])


def test_an_output_that_reached_its_own_max_tokens_is_not_kept_as_truncated() -> None:
    # finish_reason length at max_tokens is what the user asked for: head sampling decides
    assert _sampler().decide(_finished(16), max_new_tokens=16).skipped == "not_sampled"
    assert _sampler().decide(_finished(16), max_new_tokens=None).skipped == "not_sampled"


@pytest.mark.parametrize(
    "stats",
    [
        _finished(9),  # stopped by the context window before the request's own max_tokens
        _finished(4, "stop", truncated_prompt_tokens=3),  # the prompt was cut to fit the window
        _finished(16, truncated_prompt_tokens=1),
    ],
)
def test_truncation_against_the_users_intent_is_kept(stats: RequestStats) -> None:
    assert _sampler().decide(stats, max_new_tokens=16).reasons == ("low_quality",)


def test_the_truncated_rule_can_be_turned_off() -> None:
    rules = SamplingRules.model_validate({"head_rate": 0.0, "always_keep": {"truncated": False}})
    sampler = Sampler(rules, rng=random.Random(3))
    assert not sampler.decide(_finished(9, truncated_prompt_tokens=3), max_new_tokens=16).keep


def test_the_writer_judges_truncation_against_the_requests_max_new_tokens(spool: Path) -> None:
    config = SinkSettings.model_validate({"spool_dir": spool})
    writer = SampleWriter(config, rng=random.Random(1))
    writer.sampler.rules = SamplingRules.model_validate({"head_rate": 0.0})
    at_max = Sample(_finished(16), ("p",), ("o",), {"max_new_tokens": 16}, 1.0)
    short = Sample(_finished(9), ("p",), ("o",), {"max_new_tokens": 16}, 1.0)
    assert [writer.write(at_max), writer.write(short)] == [False, True]
    writer.close()
