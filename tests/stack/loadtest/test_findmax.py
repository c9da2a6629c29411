"""The capacity search's logic against a fake probe (no network)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from stack.loadtest.findmax import Probe, SearchStopped, find_max


def _probe(capacity: float, flips: set[int] | None = None) -> Callable[[float, int], Probe]:
    counter = itertools.count()

    def probe(rate: float, repeat: int) -> Probe:
        n = next(counter)
        held = rate <= capacity
        if flips and n in flips:
            held = not held  # one noisy run
        return Probe(rate, repeat, held, [] if held else ["too slow"], {})

    return probe


def test_it_grows_then_bisects_to_within_the_tolerance() -> None:
    result = find_max(_probe(37.0), start=1, factor=2, repeats=1, tolerance=0.05)
    assert result.max_rate <= 37.0 < result.first_broken  # type: ignore[operator]
    assert (result.first_broken - result.max_rate) / result.max_rate <= 0.05  # type: ignore[operator]
    assert [p.rate for p in result.probes][:7] == [1, 2, 4, 8, 16, 32, 64]


def test_repeats_outvote_a_noisy_run() -> None:
    # run 0 (rate 10, first repeat) wrongly breaks; the majority of three still holds it
    result = find_max(_probe(25.0, flips={0}), start=10, factor=2, repeats=3, tolerance=0.1)
    assert 22 <= result.max_rate <= 25.0
    assert sum(1 for p in result.probes if p.rate == 10) == 3
    # a clear answer stops after the majority: two runs at 40 (both broke)
    assert sum(1 for p in result.probes if p.rate == 40) == 2


def test_a_start_that_breaks_reports_zero_and_a_limit_that_holds_stops() -> None:
    assert find_max(_probe(0.5), start=1, repeats=1).max_rate == 0
    held = find_max(_probe(1e9), start=1, repeats=1, limit=8)
    assert held.max_rate == 8 and held.first_broken is None


def test_a_probe_that_cannot_be_trusted_stops_the_search_with_its_reason() -> None:
    def probe(rate: float, repeat: int) -> Probe:
        if rate > 4:
            raise SearchStopped("generator saturated")
        return Probe(rate, repeat, True, [], {})

    result = find_max(probe, start=1, repeats=1)
    assert result.max_rate == 4 and result.stopped == "generator saturated"
