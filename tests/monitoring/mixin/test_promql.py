"""Durations and their compression for the test rule set."""

from __future__ import annotations

import pytest

from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.promql import (
    NORMAL,
    DurationError,
    Timing,
    number,
    render_seconds,
    seconds,
)

COMPRESSED = config.timing(compressed=True)


def test_seconds_and_back() -> None:
    assert [seconds(d) for d in ("30s", "5m", "1h", "3d", "1w")] == [30, 300, 3600, 259200, 604800]
    assert [render_seconds(s) for s in (300, 3600, 90, 86400 * 7)] == ["5m", "1h", "90s", "1w"]


@pytest.mark.parametrize("bad", ["", "5", "1h30m", "5M", "-1m"])
def test_bad_durations_are_refused(bad: str) -> None:
    with pytest.raises(DurationError):
        seconds(bad)


def test_compression_divides_and_floors() -> None:
    assert NORMAL("6h") == "6h"
    assert COMPRESSED("6h") == "6m" and COMPRESSED("3d") == "72m" and COMPRESSED("1d") == "24m"
    assert COMPRESSED("1m") == "5s"  # never under compressed_min_seconds
    assert COMPRESSED.secs("10m") == "10" and NORMAL.secs("10m") == "600"
    assert COMPRESSED == Timing(config.compression_factor, config.compressed_min_seconds)
    assert config.timing() == NORMAL


def test_number_has_no_float_noise() -> None:
    assert number(14.4 * (1 - 0.995)) == "0.072"
    assert number(0.5) == "0.5"
