"""Sampling decisions: always-keep rules, head rate, per-key caps, strict rules file."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from log_pipeline.sampler import DEFAULT_RULES_FILE, RulesError, Sampler, SamplingRules, load_rules
from tests.log_pipeline.conftest import make_sample


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
    decision = _sampler().decide(make_sample(1, **kwargs).stats)  # type: ignore[arg-type]
    assert decision.keep and decision.reasons == (reason,)


def test_ordinary_requests_follow_the_head_rate() -> None:
    sampler = _sampler(head_rate=0.25)
    kept = sum(sampler.decide(make_sample(i).stats).keep for i in range(4000))
    assert 800 < kept < 1200
    assert _sampler().decide(make_sample(1).stats).skipped == "not_sampled"


def test_several_reasons_are_all_listed() -> None:
    d = _sampler().decide(make_sample(1, status=500, total_s=9.0, version_label="canary").stats)
    assert d.reasons == ("error", "slow", "canary")


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
