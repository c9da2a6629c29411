"""`--find-max`: the highest arrival rate that holds the SLO, with the runs that show it.

Grow the rate by `factor` from `start` until a rate breaks the SLO (or `limit` is reached), then
bisect between the last rate that held and the first that broke until they are within
`tolerance` of each other. Each rate is run up to `repeats` times and holds when most of its runs
hold; the repeats stop as soon as the majority is decided, so a clear answer costs one or two
runs and only a rate near the edge costs all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Probe:
    """One run at one rate."""

    rate: float
    repeat: int
    held: bool
    reasons: list[str]
    figures: dict[str, Any]  # the run's client summary (and its label in the report)


@dataclass
class FindMax:
    """The answer and its evidence."""

    max_rate: float  # 0 when even the start rate broke
    first_broken: float | None  # None when `limit` held
    probes: list[Probe] = field(default_factory=list)
    stopped: str | None = None  # why the search ended early (a saturated generator)

    def as_dict(self) -> dict[str, Any]:
        """For summary.json."""
        return {
            "max_rate": self.max_rate,
            "first_broken": self.first_broken,
            "stopped": self.stopped,
            "probes": [
                {"rate": p.rate, "repeat": p.repeat, "held": p.held, "reasons": p.reasons}
                for p in self.probes
            ],
        }


class SearchStopped(Exception):
    """A probe could not be trusted (e.g. the generator saturated); ends the search."""


def find_max(
    probe: Callable[[float, int], Probe],
    *,
    start: float,
    factor: float = 2.0,
    repeats: int = 3,
    tolerance: float = 0.1,
    limit: float = 10_000.0,
) -> FindMax:
    """Search with `probe(rate, repeat)`; see the module docstring."""
    found = FindMax(max_rate=0.0, first_broken=None)

    def holds(rate: float) -> bool:
        rate = round(rate, 4)
        need = repeats // 2 + 1
        yes = no = 0
        for i in range(repeats):
            p = probe(rate, i)
            found.probes.append(p)
            yes, no = yes + p.held, no + (not p.held)
            if yes >= need or no >= need:
                break
        return yes >= need

    try:
        rate = start
        while True:
            if not holds(rate):
                found.first_broken = round(rate, 4)
                break
            found.max_rate = round(rate, 4)
            if rate >= limit:
                return found
            rate = min(rate * factor, limit)
        lo, hi = found.max_rate, found.first_broken
        while lo > 0 and (hi - lo) / lo > tolerance:
            mid = (lo + hi) / 2
            if holds(mid):
                lo = found.max_rate = round(mid, 4)
            else:
                hi = found.first_broken = round(mid, 4)
    except SearchStopped as why:
        found.stopped = str(why)
    return found
