"""The one quantile: linear between the closest ranks, None without values."""

from __future__ import annotations

import pytest

from stack.loadtest.stats import quantile, quantiles


def test_quantile_interpolates_between_ranks_whatever_the_order() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert quantile(values, 0.5) == pytest.approx(50.5)
    assert quantile(values[::-1], 0.99) == pytest.approx(99.01)
    assert quantile(values, 1.0) == 100.0 and quantile(values, 0.0) == 1.0
    assert quantile([5.0], 0.99) == 5.0
    assert quantile([], 0.5) is None
    assert quantiles([1.0, 3.0], (0.5, 0.9)) == {"p50": 2.0, "p90": pytest.approx(2.8)}


@pytest.mark.parametrize("q", [-0.1, 1.5, 50])
def test_a_quantile_outside_0_1_is_an_error(q: float) -> None:
    with pytest.raises(ValueError, match="quantile must be in"):
        quantile([1.0, 2.0], q)
