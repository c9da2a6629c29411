"""Circuit breaker on the upstream: closed → open after N consecutive failures → half-open probe."""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import IntEnum


class BreakerState(IntEnum):
    """Exported as the gauge value: higher is worse."""

    CLOSED = 0
    HALF_OPEN = 1
    OPEN = 2


class CircuitBreaker:
    """Consecutive-failure breaker with a single half-open probe at a time."""

    def __init__(
        self,
        failure_threshold: int,
        open_s: float,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[BreakerState], None] | None = None,
    ) -> None:
        self.failure_threshold = failure_threshold
        self.open_s = open_s
        self._clock = clock
        self._on_change = on_change
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._probe_in_flight = False

    @property
    def state(self) -> BreakerState:
        """Current state; an open breaker whose cool-down passed reads as half-open."""
        if self._state is BreakerState.OPEN and self._clock() - self._opened_at >= self.open_s:
            self._set(BreakerState.HALF_OPEN)
        return self._state

    def retry_after(self) -> float:
        """Seconds until the breaker lets a probe through."""
        return max(0.0, self.open_s - (self._clock() - self._opened_at))

    def allow(self) -> bool:
        """Whether a request may call the upstream now (half-open lets one probe at a time)."""
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.HALF_OPEN and not self._probe_in_flight:
            self._probe_in_flight = True
            return True
        return False

    def record_success(self) -> None:
        """An upstream call succeeded."""
        self._failures = 0
        self._probe_in_flight = False
        if self._state is not BreakerState.CLOSED:
            self._set(BreakerState.CLOSED)

    def record_failure(self) -> None:
        """An upstream call failed (unreachable, 5xx, timeout)."""
        self._failures += 1
        was_probe = self._probe_in_flight
        self._probe_in_flight = False
        if was_probe or self._failures >= self.failure_threshold:
            self._opened_at = self._clock()
            self._set(BreakerState.OPEN)

    def record_neutral(self) -> None:
        """A call that says nothing about upstream health (e.g. cut short by the client)."""
        self._probe_in_flight = False

    def _set(self, state: BreakerState) -> None:
        if state is not self._state:
            self._state = state
            if self._on_change is not None:
                self._on_change(state)
