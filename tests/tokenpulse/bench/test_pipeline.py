"""The pipeline bench's histogram quantile (the rest starts processes: run the bench)."""

from __future__ import annotations

import math

from tokenpulse.bench.pipeline import _quantile


def test_quantile_interpolates_inside_the_bucket() -> None:
    buckets = [(0.1, 0.0), (0.5, 50.0), (1.0, 100.0), (math.inf, 100.0)]
    assert _quantile(buckets, 0.5) == 0.5
    assert abs(_quantile(buckets, 0.75) - 0.75) < 1e-9
    assert abs(_quantile(buckets, 0.25) - 0.3) < 1e-9


def test_quantile_of_nothing_is_nan_and_overflow_is_the_last_bound() -> None:
    assert math.isnan(_quantile([(1.0, 0.0), (math.inf, 0.0)], 0.5))
    assert _quantile([(1.0, 1.0), (math.inf, 10.0)], 0.95) == 1.0
