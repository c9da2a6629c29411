"""Intended send times: rates, ramps, determinism."""

from __future__ import annotations

import pytest

from stack.loadtest.arrivals import RateProfile, schedule


def test_constant_arrivals_are_evenly_spaced_at_the_rate() -> None:
    times = schedule(RateProfile(rate=10, duration_s=2), "constant")
    assert len(times) == 20
    assert times[:3] == pytest.approx([0.0, 0.1, 0.2])


def test_poisson_arrivals_average_the_rate_and_repeat_with_the_seed() -> None:
    times = schedule(RateProfile(rate=50, duration_s=40), "poisson", seed=3)
    assert 1800 < len(times) < 2200
    assert times == sorted(times) and all(0 <= t < 40 for t in times)
    assert times == schedule(RateProfile(rate=50, duration_s=40), "poisson", seed=3)
    assert times != schedule(RateProfile(rate=50, duration_s=40), "poisson", seed=4)


def test_a_ramp_rises_linearly_then_holds() -> None:
    profile = RateProfile(rate=20, duration_s=10, start=0, ramp_s=4)
    times = schedule(profile, "constant")
    # expected arrivals: the ramp's triangle (0.5 * 4 * 20) plus 6 s at 20/s
    assert len(times) == 40 + 120
    first_half = [t for t in times if t < 2]
    second_half = [t for t in times if 2 <= t < 4]
    assert len(first_half) == 10 and len(second_half) == 30
    assert profile.rate_at(1) == pytest.approx(5) and profile.rate_at(5) == 20
