"""Per-key token buckets for requests and for generated tokens (reserve up front, refund after)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field


class BudgetTooLarge(ValueError):
    """A single request needs more than the bucket can ever hold."""


@dataclass
class TokenBucket:
    """A bucket of `capacity` that refills at `capacity` per minute."""

    capacity: float
    clock: Callable[[], float] = time.monotonic
    level: float = field(init=False)
    stamp: float = field(init=False)

    def __post_init__(self) -> None:
        self.level = self.capacity
        self.stamp = self.clock()

    @property
    def rate(self) -> float:
        """Refill per second."""
        return self.capacity / 60.0

    def _refill(self) -> None:
        now = self.clock()
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, amount: float) -> float:
        """Seconds until `amount` fits (0 when it fits now)."""
        if amount > self.capacity:
            raise BudgetTooLarge(f"needs {amount:g}, limit is {self.capacity:g} per minute")
        self._refill()
        deficit = amount - self.level
        return 0.0 if deficit <= 0 else deficit / self.rate

    def take(self, amount: float) -> None:
        """Remove `amount` (call after `wait_for` returned 0)."""
        self._refill()
        self.level -= amount

    def give_back(self, amount: float) -> None:
        """Return unused budget, never above capacity."""
        self._refill()
        self.level = min(self.capacity, self.level + amount)


@dataclass
class Reservation:
    """Tokens held for one request until it finishes."""

    key_id: str
    tokens: int


class RateLimiter:
    """Request and token buckets per key id; one event loop, so no locks are needed."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._requests: dict[str, TokenBucket] = {}
        self._tokens: dict[str, TokenBucket] = {}

    def _bucket(self, table: dict[str, TokenBucket], key_id: str, limit: float) -> TokenBucket:
        bucket = table.get(key_id)
        if bucket is None or bucket.capacity != limit:
            bucket = table[key_id] = TokenBucket(limit, self._clock)
        return bucket

    def acquire(
        self, key_id: str, *, requests_per_minute: float, tokens_per_minute: float, tokens: int
    ) -> tuple[Reservation | None, float, str]:
        """Take one request and `tokens` tokens, or nothing.

        Returns (reservation, 0, "") on success, else (None, retry_after_s, which_limit).
        Raises BudgetTooLarge when `tokens` exceeds the key's whole per-minute budget.
        """
        req = self._bucket(self._requests, key_id, requests_per_minute)
        tok = self._bucket(self._tokens, key_id, tokens_per_minute)
        wait_tokens = tok.wait_for(tokens)
        wait_requests = req.wait_for(1)
        if wait_requests > 0:
            return None, wait_requests, "requests"
        if wait_tokens > 0:
            return None, wait_tokens, "tokens"
        req.take(1)
        tok.take(tokens)
        return Reservation(key_id, tokens), 0.0, ""

    def headers(
        self, key_id: str, *, requests_per_minute: float, tokens_per_minute: float
    ) -> dict[str, str]:
        """OpenAI's `x-ratelimit-*` headers from the key's two buckets as they stand now."""
        out: dict[str, str] = {}
        for kind, table, limit in (
            ("requests", self._requests, requests_per_minute),
            ("tokens", self._tokens, tokens_per_minute),
        ):
            bucket = self._bucket(table, key_id, limit)
            bucket.give_back(0)  # refill up to now
            out[f"x-ratelimit-limit-{kind}"] = f"{limit:g}"
            out[f"x-ratelimit-remaining-{kind}"] = str(max(0, math.floor(bucket.level)))
            out[f"x-ratelimit-reset-{kind}"] = duration((limit - bucket.level) / bucket.rate)
        return out

    def refund(self, reservation: Reservation, used: int) -> None:
        """Give back what a finished request reserved but did not generate."""
        unused = reservation.tokens - max(0, used)
        bucket = self._tokens.get(reservation.key_id)
        if bucket is not None and unused > 0:
            bucket.give_back(unused)


def duration(seconds: float) -> str:
    """A duration as OpenAI's reset headers write it: `20ms`, `1s`, `6m0s`."""
    if seconds < 1:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    whole = math.ceil(seconds)
    return f"{whole // 60}m{whole % 60}s" if whole >= 60 else f"{whole}s"


def retry_after_header(seconds: float) -> str:
    """Whole seconds, at least 1, as `Retry-After` wants."""
    return str(max(1, math.ceil(seconds)))
