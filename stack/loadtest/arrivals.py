"""Intended send times: Poisson or constant arrivals at a rate, optionally ramped up linearly.

A schedule is fixed before the run starts, so no response can move a send time: latency is
measured from these intended times (no coordinated omission).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal

Arrival = Literal["poisson", "constant"]


@dataclass(frozen=True)
class RateProfile:
    """`start` rising linearly to `rate` over `ramp_s` seconds, then held until `duration_s`."""

    rate: float
    duration_s: float
    start: float | None = None  # None: no ramp
    ramp_s: float = 0.0

    def rate_at(self, t: float) -> float:
        """Requests per second at `t` seconds into the run."""
        if self.start is None or self.ramp_s <= 0 or t >= self.ramp_s:
            return self.rate
        return self.start + (self.rate - self.start) * t / self.ramp_s

    def _ramp(self) -> tuple[float, float]:
        """(start rate, ramp seconds), (rate, 0) without a ramp."""
        if self.start is None or self.ramp_s <= 0:
            return self.rate, 0.0
        return self.start, min(self.ramp_s, self.duration_s)

    def cumulative(self, t: float) -> float:
        """Expected arrivals in [0, t]: the integral of the rate."""
        a, ramp = self._ramp()
        slope = (self.rate - a) / self.ramp_s if ramp else 0.0
        if t <= ramp:
            return a * t + slope * t * t / 2
        return a * ramp + slope * ramp * ramp / 2 + self.rate * (t - ramp)

    def inverse(self, n: float) -> float:
        """The time by which `n` arrivals are expected (inf when the rate never gets there)."""
        a, ramp = self._ramp()
        slope = (self.rate - a) / self.ramp_s if ramp else 0.0
        at_ramp_end = self.cumulative(ramp)
        if n <= at_ramp_end and ramp:
            if abs(slope) < 1e-12:
                return n / a if a > 0 else math.inf
            disc = a * a + 2 * slope * n
            return (-a + math.sqrt(max(disc, 0.0))) / slope
        if self.rate <= 0:
            return math.inf
        return ramp + (n - at_ramp_end) / self.rate


def schedule(profile: RateProfile, arrival: Arrival = "poisson", seed: int = 0) -> list[float]:
    """Intended send offsets in seconds from the run's start, ascending, all < duration_s.

    Poisson arrivals are a non-homogeneous Poisson process by time rescaling (unit-rate
    exponential gaps mapped through the inverse cumulative rate); constant arrivals put the
    n-th request where n requests are expected, the first at 0.
    """
    rng = random.Random(seed)
    times: list[float] = []
    n = 0.0 if arrival == "constant" else rng.expovariate(1.0)
    while True:
        t = profile.inverse(n)
        if not t < profile.duration_s:
            return times
        times.append(t)
        n += 1.0 if arrival == "constant" else rng.expovariate(1.0)
