"""Training alerts: every one skips a worker that finished the run, through one guard."""

from __future__ import annotations

import pytest

from monitoring.mixin.alerts import training
from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.promql import Timing


@pytest.mark.parametrize("t", [Timing(), config.timing(compressed=True)], ids=["real", "drill"])
def test_every_alert_ends_with_the_one_finished_guard(t: Timing) -> None:
    """The guard is written once: each alert is its condition, then the same `unless`."""
    guard = training.unless_finished(config, t, "X").removeprefix("X")
    assert guard.startswith("\nunless on (job, instance) ")
    assert f"[{t(config.training_finished_window)}]" in guard
    rules = training.alerts(config, t)
    assert len(rules) == 5
    for alert in rules:
        assert alert.expr.endswith(guard), alert.name
        assert alert.expr.count("finished") == 1, alert.name
