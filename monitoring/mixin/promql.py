"""Small PromQL-building helpers: durations (with time compression) and numbers."""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"^(\d+)([wdhms])$")


class DurationError(ValueError):
    """A duration string the generator cannot read."""


def seconds(duration: str) -> int:
    """Seconds in a one-unit Prometheus duration such as "5m" or "3d"."""
    m = _DURATION.match(duration)
    if m is None:
        raise DurationError(f"bad duration {duration!r} (want e.g. 5m, 1h, 3d)")
    return int(m[1]) * _UNITS[m[2]]


def render_seconds(total: int) -> str:
    """The largest whole unit that expresses `total` seconds exactly."""
    total = max(1, total)
    for unit, size in _UNITS.items():
        if total % size == 0:
            return f"{total // size}{unit}"
    return f"{total}s"  # unreachable: every integer is whole seconds


def number(value: float) -> str:
    """A threshold as PromQL text: 0.072, not 0.07200000000000001."""
    return f"{value:.6g}"


@dataclass(frozen=True)
class Timing:
    """Turns config durations into rule durations: as given, or divided by a factor (but never
    below `min_seconds`: a `for` of one scrape would fire on a single slow scrape)."""

    factor: int = 1
    min_seconds: int = 5

    def __call__(self, duration: str) -> str:
        """A window, offset or `for`, compressed."""
        if self.factor == 1:
            return duration
        return render_seconds(self._compressed(duration))

    def secs(self, duration: str) -> str:
        """The same, as a number of seconds (for comparisons with time())."""
        return str(self._compressed(duration) if self.factor != 1 else seconds(duration))

    def _compressed(self, duration: str) -> int:
        return max(self.min_seconds, seconds(duration) // self.factor)


# the rule set as configured; compressed ones come from MixinConfig.timing(compressed=True)
NORMAL = Timing()
