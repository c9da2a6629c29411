"""The gateway's composition root: builds its parts from the settings and routes the paths to
the endpoints (`native`, `completions`, `chat` on the shared `handler`; `models`, `feedback`;
the probes), with start-up and clean-up."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from serving.gateway import admin, chat, completions, native
from serving.gateway.admission import Admission
from serving.gateway.breaker import CircuitBreaker
from serving.gateway.chunkbatch import ChunkBatcher
from serving.gateway.drain import Drain
from serving.gateway.errors import GatewayError, native_body, openai_body
from serving.gateway.feedback import FeedbackEndpoint, RecentResponses
from serving.gateway.handler import Handler, json_response
from serving.gateway.jobs import Limits
from serving.gateway.keys import KeyStore
from serving.gateway.metrics import GatewayMetrics
from serving.gateway.models import ModelsEndpoint
from serving.gateway.openapi import build_openapi
from serving.gateway.outcome import Outcomes
from serving.gateway.pipeline import Pipeline
from serving.gateway.probes import Probes
from serving.gateway.protocol import Endpoint
from serving.gateway.ratelimit import RateLimiter
from serving.gateway.replicas import Replicas
from serving.gateway.routing import Router
from serving.gateway.settings import GatewaySettings
from serving.gateway.sink import SampleDispatcher, load_sink
from serving.gateway.upkeep import Upkeep
from tokenpulse.logging import get_logger
from tokenpulse.samples import SampleSink

log = get_logger(__name__)
GATEWAY_KEY: web.AppKey[Gateway] = web.AppKey("gateway")
# the native API's paths; every other /v1/* path is OpenAI's, and so are its errors
NATIVE_PATHS = ("/v1/generate", "/v1/feedback")
GENERATION = {
    "/v1/generate": native.ENDPOINT,
    "/v1/completions": completions.ENDPOINT,
    "/v1/chat/completions": chat.ENDPOINT,
}


@web.middleware
async def json_route_errors(
    request: web.Request, handler: Callable[..., Any]
) -> web.StreamResponse:
    """Unknown paths and wrong methods answer in JSON, not plain text: in the OpenAI error shape
    under /v1/ (what the openai SDK reads), in the native shape elsewhere and on native paths."""
    try:
        return await handler(request)
    except (web.HTTPNotFound, web.HTTPMethodNotAllowed) as exc:
        err = GatewayError(f"{request.method} {request.path}: {exc.reason.lower()}")
        err.status, err.code = exc.status, exc.reason.lower().replace(" ", "_")
        err.openai_type = "invalid_request_error"
        headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        openai = request.path.startswith("/v1/") and not request.path.startswith(NATIVE_PATHS)
        shape = openai_body if openai else native_body
        rid = request.headers.get("X-Request-ID", "")
        return json_response(shape(err, rid), exc.status, headers)


class Gateway:
    """Everything one gateway process holds; `app()` wires it into aiohttp."""

    def __init__(self, settings: GatewaySettings, sink: SampleSink | None = None) -> None:
        self.settings = s = settings
        self.metrics = GatewayMetrics(models=s.models, replicas=len(s.upstream_urls))
        self.router = Router(
            s.models, stable_label=s.stable_label, canary_label=s.canary_label,
            canary_weight=s.canary_weight, model_config_file=s.model_config_file,
        )  # fmt: skip
        self.upstreams = Replicas(s.upstream_urls, s.max_concurrency, self.metrics)
        self.upkeep = Upkeep(s, self.router, self.upstreams, self.metrics)
        self.breaker = CircuitBreaker(
            s.breaker_failure_threshold, s.breaker_open_s, on_change=self._breaker_changed
        )
        self.admission = Admission(s.max_concurrency, s.max_queue, s.max_queue_wait_s)
        self.pipeline = Pipeline(
            s, self.router, self.upstreams, self.breaker, self.admission, RateLimiter(),
            self.upkeep.refresh, self.upkeep.caps,
        )  # fmt: skip
        self.chunks = (
            ChunkBatcher(
                self.upstreams.continue_, s.stream_batch_rows, parallel=len(s.upstream_urls)
            )
            if s.stream_batch_rows
            else None
        )
        self.samples = SampleDispatcher(
            sink if sink is not None else load_sink(s.sample_sink, self.metrics.registry),
            s.sample_queue_size,
            on_drop=self.metrics.samples_dropped.inc,
        )
        limits = Limits(
            max_prompt_chars=s.max_prompt_chars, max_prompts=s.max_prompts,
            max_new_tokens_limit=s.max_new_tokens_limit,
            default_max_new_tokens=s.default_max_new_tokens, default_model=s.models[0],
            context_window_tokens=s.context_window_tokens,
        )  # fmt: skip
        recent = RecentResponses(s.feedback_window_s, s.feedback_max_responses)
        outcomes = Outcomes(self.metrics, recent.remember, self.samples, s.access_log)
        self.drain = Drain()
        self.handler = Handler(
            s, lambda: self.upkeep.keys, self.pipeline, limits, self.chunks, self.metrics,
            outcomes, self.drain,
        )  # fmt: skip
        self.models = ModelsEndpoint(
            self.handler, self.router, s.context_window_tokens, self.upkeep.caps
        )
        self.feedback = FeedbackEndpoint(
            self.handler, recent, self.metrics, self.samples, s.feedback_max_comment_chars
        )
        self.probes = Probes(self.upkeep, self.breaker, self.admission, self.metrics, self.drain)
        self._openapi = json.dumps(build_openapi(s)).encode()

    @property
    def keys(self) -> KeyStore:
        """The API keys loaded now."""
        return self.upkeep.keys

    def _breaker_changed(self, state: Any) -> None:
        self.metrics.breaker_state.set(int(state))
        log.warning("circuit breaker state changed", state=state.name.lower())

    async def _on_startup(self, app: web.Application) -> None:
        await self.upstreams.start()
        self.samples.start()
        self.upkeep.start()
        self.probes.started = True

    async def _on_cleanup(self, app: web.Application) -> None:
        await self.upkeep.stop()
        await self.samples.stop()
        if self.chunks is not None:
            await self.chunks.close()
        await self.upstreams.close()

    def _generation(
        self, endpoint: Endpoint
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def serve(request: web.Request) -> web.StreamResponse:
            return await self.handler.serve(request, endpoint)

        return serve

    async def _openapi_doc(self, request: web.Request) -> web.Response:
        return web.Response(body=self._openapi, content_type="application/json")

    def app(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application(
            client_max_size=self.settings.max_body_bytes, middlewares=[json_route_errors]
        )
        app[GATEWAY_KEY] = self
        app.router.add_get("/healthz", self.probes.healthz)
        app.router.add_get("/health", self.probes.health)
        app.router.add_get("/readyz", self.probes.readyz)
        app.router.add_get("/metrics", self.probes.metrics_page)
        app.router.add_get("/openapi.json", self._openapi_doc)
        for path, endpoint in GENERATION.items():
            app.router.add_post(path, self._generation(endpoint))
        app.router.add_get("/v1/models", self.models.handle)
        app.router.add_post("/v1/feedback", self.feedback.handle)
        admin.install(app, self.router, self.settings)  # the canary weight file, if any
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        return app
