"""The operational endpoints: liveness (`/healthz`, `/health`), readiness (`/readyz`) and the
metrics page, with the probe bodies as `/openapi.json` declares them.

Readiness is the pod's own state (started, keys loaded, not draining), never the upstream's: a
TF Serving blip must not take every gateway out of its Service at once, since clients then get a
load balancer's bare 503 instead of the gateway's typed errors and breaker. The upstream's state
stays in the body (`upstream_ready` and the rest), in the metrics and in the alerts.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Literal

from aiohttp import web
from pydantic import BaseModel, Field

from serving.gateway.admission import Admission
from serving.gateway.breaker import CircuitBreaker
from serving.gateway.drain import Drain
from serving.gateway.handler import json_response
from serving.gateway.metrics import GatewayMetrics
from serving.gateway.upkeep import Upkeep

# /readyz re-reads the models' versions live, but never waits longer than this for them (a
# kubelet probe times out after 1 s): a slow upstream leaves the last known state in the body
READYZ_REFRESH_S = 0.5


class Health(BaseModel):
    """The process is up."""

    status: Literal["ok"] = "ok"


class ModelReadiness(BaseModel):
    """One served model: its AVAILABLE versions and its version labels."""

    available_versions: list[str]
    labels: dict[str, int]


class Readiness(BaseModel):
    """Ready (200) when started with its keys loaded and not draining; the upstream's state is
    reported, and does not change the status."""

    status: Literal["ready", "not_ready", "draining"]
    draining: bool = Field(description="SIGTERM received: finishing the requests in flight.")
    upstream_ready: bool = Field(
        description="The upstream answered and every model has an AVAILABLE version."
    )
    upstream_reachable: bool
    models: dict[str, ModelReadiness]
    circuit_breaker: Literal["closed", "half_open", "open"]


@dataclass
class Probes:
    """Handlers of the probes and the metrics page."""

    upkeep: Upkeep
    breaker: CircuitBreaker
    admission: Admission
    metrics: GatewayMetrics
    drain: Drain
    started: bool = False  # the app's start-up hooks ran

    async def healthz(self, request: web.Request) -> web.Response:
        """Process alive."""
        return json_response(Health())

    async def health(self, request: web.Request) -> web.Response:
        """vLLM's `GET /health` (load testers probe it): 200 with an empty body while alive."""
        return web.Response(status=200)

    async def readyz(self, request: web.Request) -> web.Response:
        """The pod's own readiness, with what it knows of the upstream (re-read live)."""
        router = self.upkeep.router
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._refresh(), READYZ_REFRESH_S)
        ready = self.started and not self.drain.draining
        status = "ready" if ready else "draining" if self.drain.draining else "not_ready"
        body = Readiness(
            status=status,  # type: ignore[arg-type]
            draining=self.drain.draining,
            upstream_ready=self.upkeep.upstream_ready(),
            upstream_reachable=self.upkeep.upstream_ok,
            models={
                m: ModelReadiness(available_versions=[str(v) for v in s.available], labels=s.labels)
                for m, s in router.models.items()
            },
            circuit_breaker=self.breaker.state.name.lower(),  # type: ignore[arg-type]
        )
        return json_response(body, 200 if ready else 503, None if ready else {"Retry-After": "1"})

    async def _refresh(self) -> None:
        for model in self.upkeep.router.models:
            await self.upkeep.refresh(model)

    async def metrics_page(self, request: web.Request) -> web.Response:
        """Prometheus exposition."""
        self.metrics.breaker_state.set(int(self.breaker.state))  # open → half-open is lazy
        a = self.admission
        self.metrics.queued.set(a.queued)
        self.metrics.saturation.set(min(1.0, (a.in_use + a.queued) / (a.limit + a.max_queue)))
        # a big page takes a while to render: in a thread, requests keep flowing meanwhile
        accept = request.headers.get("Accept", "")
        body, content_type = await asyncio.to_thread(self.metrics.exposition, accept)
        return web.Response(body=body, headers={"Content-Type": content_type})
