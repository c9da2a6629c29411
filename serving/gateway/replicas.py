"""Client-side balancing over TF Serving replicas: per-replica health, least outstanding, one retry.

- Health comes from each replica's model status (the gateway's status poll, every replica polled
  at once): a replica is in rotation once a poll sees an AVAILABLE version of the model; a
  connection failure on a predict, or a poll it does not answer, takes it out until a poll sees
  an AVAILABLE version again.
- A request goes to the in-rotation replica, among those serving the routed version, with the
  fewest predict calls outstanding; ties go round-robin. Least outstanding rather than plain
  round-robin because generations differ in length: round-robin keeps feeding a replica that is
  stuck on long ones, while least outstanding evens out the work each replica's batcher holds
  (and is round-robin when the replicas keep pace).
- A connection failure before any answer (refused, reset, closed before the response) is retried
  once on another replica: a predict has no side effect, so a retry is safe. A timeout or an
  HTTP error is not retried: the replica answered or may still be working.
- With no replica in rotation for a version, the ones that last listed it are tried anyway
  (as Envoy's panic threshold does): failing fast would not make them come back sooner.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from serving.gateway.metrics import GatewayMetrics
from serving.gateway.upstream import (
    Chunk,
    Prediction,
    TFServingClient,
    UpstreamBadResponse,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTimeout,
    UpstreamUnreachable,
)

T = TypeVar("T")
# one upstream call on a client: (client, remaining seconds) -> (result, upstream seconds)
Call = Callable[[TFServingClient, float], Awaitable[tuple[T, float]]]


@dataclass
class Replica:
    """One TF Serving replica as the gateway sees it."""

    index: int
    client: TFServingClient
    versions: dict[str, frozenset[int]] = field(default_factory=dict)  # model -> AVAILABLE
    in_rotation: bool = False
    outstanding: int = 0

    @property
    def label(self) -> str:
        """The `replica` label value: the index of its URL in the settings."""
        return str(self.index)

    @property
    def url(self) -> str:
        """Its REST base URL."""
        return self.client.base_url


class Replicas:
    """Every configured replica; `predict` and `available_versions` as one TF Serving would."""

    def __init__(self, urls: list[str], pool_size: int, metrics: GatewayMetrics) -> None:
        if not urls:
            raise ValueError("at least one upstream URL")
        self.replicas = [Replica(i, TFServingClient(u, pool_size)) for i, u in enumerate(urls)]
        self._metrics = metrics
        self._turn = itertools.count()

    async def start(self) -> None:
        """Open each replica's connection pool."""
        for r in self.replicas:
            await r.client.start()

    async def close(self) -> None:
        """Close every pool."""
        for r in self.replicas:
            await r.client.close()

    def _set_rotation(self, replica: Replica, in_rotation: bool) -> None:
        replica.in_rotation = in_rotation
        self._metrics.upstream_healthy.labels(replica.label).set(int(in_rotation))

    # ---- health -----------------------------------------------------------------------------

    async def _poll_one(self, replica: Replica, model: str, timeout_s: float) -> list[int] | None:
        try:
            versions = await replica.client.available_versions(model, timeout_s=timeout_s)
        except UpstreamError:
            self._set_rotation(replica, False)  # keeps its last versions, for the panic case
            return None
        replica.versions[model] = frozenset(versions)
        if versions:
            self._set_rotation(replica, True)
        return versions

    async def available_versions(self, model: str, timeout_s: float = 2.0) -> list[int]:
        """Poll every replica at once; the versions AVAILABLE on any replica that answered.

        Raises UpstreamUnreachable when none answered.
        """
        polled = await asyncio.gather(*(self._poll_one(r, model, timeout_s) for r in self.replicas))
        answered = [set(v) for v in polled if v is not None]
        if not answered:
            raise UpstreamUnreachable("no replica answered its model status")
        return sorted(set().union(*answered), reverse=True)

    async def signatures(self, model: str, version: int, timeout_s: float) -> dict[str, set[str]]:
        """A version's signatures and their inputs, asked of a replica serving it."""
        replica = self.pick(model, version)
        if replica is None:
            raise UpstreamUnreachable("no replica serves this version")
        return await replica.client.signatures(model, version, timeout_s)

    def healthy(self) -> list[Replica]:
        """The replicas in rotation now."""
        return [r for r in self.replicas if r.in_rotation]

    # ---- choosing ---------------------------------------------------------------------------

    def pick(
        self, model: str, version: int, exclude: frozenset[int] = frozenset()
    ) -> Replica | None:
        """The replica for one call (see the module docstring); None when none is left."""
        serving = [
            r for r in self.replicas
            if r.index not in exclude and version in r.versions.get(model, ())
        ]  # fmt: skip
        if not serving and not exclude:
            serving = list(self.replicas)  # no poll yet: let TF Serving say what it has
        candidates = [r for r in serving if r.in_rotation] or serving
        if not candidates:
            return None
        start = next(self._turn) % len(candidates)
        rotated = candidates[start:] + candidates[:start]
        return min(rotated, key=lambda r: r.outstanding)

    # ---- calling ----------------------------------------------------------------------------

    async def predict(
        self, model: str, version: int, rows: list[dict[str, Any]], timeout_s: float
    ) -> tuple[list[Prediction], float]:
        """Run rows on one version of some replica; one retry elsewhere on a connection failure."""

        async def call(client: TFServingClient, remaining: float) -> tuple[list[Prediction], float]:
            return await client.predict(model, version, rows, remaining)

        return await self._balanced(model, version, timeout_s, call)

    async def continue_(
        self, model: str, version: int, rows: list[dict[str, Any]], timeout_s: float
    ) -> tuple[list[Chunk], float]:
        """One `continue` call (the next chunk of a stream), balanced as `predict`: a stream
        holds no state on a replica, so each chunk may go to another."""

        async def call(client: TFServingClient, remaining: float) -> tuple[list[Chunk], float]:
            return await client.continue_(model, version, rows, remaining)

        return await self._balanced(model, version, timeout_s, call)

    async def _balanced(
        self, model: str, version: int, timeout_s: float, call: Call[T]
    ) -> tuple[T, float]:
        deadline = time.perf_counter() + timeout_s
        tried: frozenset[int] = frozenset()
        while True:
            replica = self.pick(model, version, tried)
            if replica is None:  # pick() finds one on the first turn; kept for type narrowing
                raise UpstreamUnreachable("no replica serves this version")
            tried |= {replica.index}
            try:
                return await self._call(replica, deadline, call)
            except UpstreamUnreachable:
                self._set_rotation(replica, False)
                if len(tried) > 1 or deadline - time.perf_counter() <= 0:
                    raise
                if self.pick(model, version, tried) is None:
                    raise
                self._metrics.upstream_retries.labels(replica.label).inc()

    async def _call(self, replica: Replica, deadline: float, call: Call[T]) -> tuple[T, float]:
        in_flight = self._metrics.upstream_in_flight.labels(replica.label)
        replica.outstanding += 1
        in_flight.inc()
        outcome: str | None = None  # stays None when the caller went away (cancelled)
        try:
            remaining = max(deadline - time.perf_counter(), 0.001)
            result = await call(replica.client, remaining)
            outcome = "success"
            return result
        except UpstreamUnreachable:
            outcome = "unreachable"
            raise
        except UpstreamTimeout:
            outcome = "timeout"
            raise
        except UpstreamHTTPError:
            outcome = "http_error"
            raise
        except UpstreamBadResponse:
            outcome = "bad_response"
            raise
        finally:
            replica.outstanding -= 1
            in_flight.dec()
            if outcome is not None:
                self._metrics.upstream_requests.labels(replica.label, outcome).inc()
