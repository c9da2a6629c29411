"""The aiohttp application: endpoints, the status poller, access logs, metrics and samples."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel

from serving.gateway import admin, chat, feedback, models, native, openai_compat, sse
from serving.gateway.admission import Admission
from serving.gateway.breaker import CircuitBreaker
from serving.gateway.chunkbatch import ChunkBatcher
from serving.gateway.errors import GatewayError, PayloadTooLarge, dump, native_body, openai_body
from serving.gateway.jobs import Job, Limits
from serving.gateway.keys import ApiKey, KeysFileError, KeyStore
from serving.gateway.metrics import CLIENT_GONE, GatewayMetrics
from serving.gateway.openapi import build_openapi
from serving.gateway.pipeline import Pipeline, authenticate, deadline_for
from serving.gateway.probes import Health, ModelReadiness, Readiness
from serving.gateway.ratelimit import RateLimiter
from serving.gateway.replicas import Replicas
from serving.gateway.routing import ModelConfigError, Router
from serving.gateway.settings import GatewaySettings
from serving.gateway.sink import SampleDispatcher, load_sink
from serving.gateway.streaming import DISCONNECT_POLL_S, ClientGone, StreamRun
from serving.gateway.upstream import UpstreamError, cancel_quietly
from tokenpulse.logging import get_logger
from tokenpulse.samples import RequestStats, Sample, SampleSink

log = get_logger(__name__)
# builds the events of one stream in an endpoint's format
Streamer = Callable[[Job, RequestStats, sse.Progress], sse.StreamEvents]
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
GATEWAY_KEY: web.AppKey[Gateway] = web.AppKey("gateway")
T = TypeVar("T")


def _json(
    body: BaseModel, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=dump(body), status=status, content_type="application/json", headers=headers
    )


# the native API's paths; every other /v1/* path is OpenAI's, and so are its errors
NATIVE_PATHS = ("/v1/generate", "/v1/feedback")


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
        return _json(shape(err, request.headers.get("X-Request-ID", "")), exc.status, headers)


def _stamp(path: Path) -> tuple[int, int, int]:
    """What changes when the keys file is rewritten in place or replaced by a rename."""
    st = path.stat()
    return st.st_mtime_ns, st.st_size, st.st_ino


class Gateway:
    """Everything one gateway process holds; `app()` wires it into aiohttp."""

    def __init__(self, settings: GatewaySettings, sink: SampleSink | None = None) -> None:
        self.settings = settings
        self.metrics = GatewayMetrics(models=settings.models, replicas=len(settings.upstream_urls))
        self.keys = KeyStore.from_file(settings.keys_file)
        self._keys_stamp: tuple[int, int, int] | None = _stamp(settings.keys_file)
        self.router = Router(
            settings.models,
            stable_label=settings.stable_label,
            canary_label=settings.canary_label,
            canary_weight=settings.canary_weight,
            model_config_file=settings.model_config_file,
        )
        self.upstreams = Replicas(settings.upstream_urls, settings.max_concurrency, self.metrics)
        self.breaker = CircuitBreaker(
            settings.breaker_failure_threshold,
            settings.breaker_open_s,
            on_change=self._breaker_changed,
        )
        self.admission = Admission(
            settings.max_concurrency, settings.max_queue, settings.max_queue_wait_s
        )
        self.pipeline = Pipeline(
            settings, self.router, self.upstreams, self.breaker, self.admission,
            RateLimiter(), self.refresh,
        )  # fmt: skip
        self.chunks = (
            ChunkBatcher(
                self.upstreams.continue_, settings.stream_batch_rows,
                parallel=len(settings.upstream_urls),
            )
            if settings.stream_batch_rows
            else None
        )  # fmt: skip
        self.samples = SampleDispatcher(
            sink if sink is not None else load_sink(settings.sample_sink, self.metrics.registry),
            settings.sample_queue_size,
            on_drop=self.metrics.samples_dropped.inc,
        )
        self.limits = Limits(
            max_prompt_chars=settings.max_prompt_chars,
            max_prompts=settings.max_prompts,
            max_new_tokens_limit=settings.max_new_tokens_limit,
            default_max_new_tokens=settings.default_max_new_tokens,
            default_model=settings.models[0],
            context_window_tokens=settings.context_window_tokens,
        )
        self.recent = feedback.RecentResponses(
            settings.feedback_window_s, settings.feedback_max_responses
        )
        self.upstream_ok = False
        self.caps: dict[tuple[str, int], models.VersionCaps] = {}  # read once per version
        self._poller: asyncio.Task[None] | None = None
        self._keys_watcher: asyncio.Task[None] | None = None
        self._openapi = json.dumps(build_openapi(settings)).encode()

    def _breaker_changed(self, state: Any) -> None:
        self.metrics.breaker_state.set(int(state))
        log.warning("circuit breaker state changed", state=state.name.lower())

    # ---- lifecycle -------------------------------------------------------------------------

    async def _on_startup(self, app: web.Application) -> None:
        await self.upstreams.start()
        self.samples.start()
        loop = asyncio.get_running_loop()
        self._poller = loop.create_task(self._poll())
        self._keys_watcher = loop.create_task(self._watch_keys())

    async def _on_cleanup(self, app: web.Application) -> None:
        await cancel_quietly(self._poller)
        await cancel_quietly(self._keys_watcher)
        await self.samples.stop()
        if self.chunks is not None:
            await self.chunks.close()
        await self.upstreams.close()

    async def refresh(self, model: str) -> None:
        """Re-read one model's AVAILABLE versions on every replica (keeps the old list when none
        answers); each replica's answer also decides whether it stays in rotation."""
        try:
            versions = await self.upstreams.available_versions(model, timeout_s=1.0)
        except UpstreamError:
            self.upstream_ok = False
            return
        self.upstream_ok = True
        self.router.set_available(model, versions)
        for version in versions:
            self.metrics.version_available(model, str(version))

    async def _read_caps(self, model: str) -> None:
        """Read what each new AVAILABLE version can do from its signatures (once per version;
        a failed read is retried at the next poll, and the listing says null meanwhile)."""
        for version in self.router.models[model].available:
            if (model, version) in self.caps:
                continue
            try:
                signatures = await self.upstreams.signatures(model, version, timeout_s=1.0)
            except UpstreamError as exc:
                log.debug("cannot read signatures", model=model, version=version, error=str(exc))
                continue
            self.caps[model, version] = models.VersionCaps.from_signatures(signatures)

    def reload_keys(self) -> None:
        """Pick up a changed keys file (e.g. `keys add` while running); keep the old on error."""
        try:
            stamp: tuple[int, int, int] | None = _stamp(self.settings.keys_file)
        except OSError as exc:
            stamp, error = None, str(exc)
        else:
            if stamp == self._keys_stamp:
                return
            try:
                self.keys, error = KeyStore.from_file(self.settings.keys_file), ""
            except KeysFileError as exc:
                error = str(exc)
        if stamp == self._keys_stamp:
            return  # still missing: said so already
        # remember a bad version too, so it is reported once rather than at every check
        self._keys_stamp = stamp
        if error:
            log.error("cannot read keys file; keeping the loaded keys", error=error)
        else:
            log.info("keys reloaded", keys=len(self.keys))

    async def _watch_keys(self) -> None:
        # one stat() per interval: cheap enough to make a removed key stop working within 1 s
        while True:
            await asyncio.sleep(self.settings.keys_poll_interval_s)
            self.reload_keys()

    async def _poll(self) -> None:
        while True:
            try:
                self.router.reload_labels()
            except (ModelConfigError, OSError) as exc:
                log.error("cannot read model config; keeping the last labels", error=str(exc))
            for model in self.router.models:
                await self.refresh(model)
                await self._read_caps(model)
            await asyncio.sleep(self.settings.status_poll_interval_s)

    # ---- plain endpoints -------------------------------------------------------------------

    async def healthz(self, request: web.Request) -> web.Response:
        """Process alive."""
        return _json(Health())

    async def health(self, request: web.Request) -> web.Response:
        """vLLM's `GET /health` (load testers probe it): 200 with an empty body while alive."""
        return web.Response(status=200)

    async def readyz(self, request: web.Request) -> web.Response:
        """Upstream reachable and every model has an AVAILABLE version (checked live)."""
        for model in self.router.models:
            await self.refresh(model)
        models = {
            m: ModelReadiness(available_versions=[str(v) for v in s.available], labels=s.labels)
            for m, s in self.router.models.items()
        }
        ready = self.upstream_ok and self.router.is_ready()
        body = Readiness(
            status="ready" if ready else "not_ready",
            upstream_reachable=self.upstream_ok,
            models=models,
            circuit_breaker=self.breaker.state.name.lower(),  # type: ignore[arg-type]
        )
        return _json(body, 200 if ready else 503, None if ready else {"Retry-After": "1"})

    async def metrics_page(self, request: web.Request) -> web.Response:
        """Prometheus exposition."""
        self.metrics.breaker_state.set(int(self.breaker.state))  # open → half-open is lazy
        self.metrics.queued.set(self.admission.queued)
        # a big page takes a while to render: in a thread, requests keep flowing meanwhile
        accept = request.headers.get("Accept", "")
        body, content_type = await asyncio.to_thread(self.metrics.exposition, accept)
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def openapi(self, request: web.Request) -> web.Response:
        """The OpenAPI document."""
        return web.Response(body=self._openapi, content_type="application/json")

    # ---- generation ------------------------------------------------------------------------

    async def generate(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/generate."""
        return await self._serve(
            request, "generate", native.parse, native.respond, native_body, native.NativeStream
        )

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/completions."""
        return await self._serve(
            request, "completions", openai_compat.parse, openai_compat.respond, openai_body,
            openai_compat.CompletionStream,
        )  # fmt: skip

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/chat/completions."""
        return await self._serve(
            request, "chat", chat.parse, chat.respond, openai_body, chat.ChatStream
        )

    async def list_models(self, request: web.Request) -> web.Response:
        """GET /v1/models: the models this key may use, with versions and labels."""
        given = request.headers.get("X-Request-ID", "")
        rid = given if _REQUEST_ID.match(given) else secrets.token_hex(12)
        try:
            key = authenticate(self.keys, request.headers.get("Authorization"))
        except GatewayError as err:
            headers = {"X-Request-ID": rid, **err.response_headers()}
            return _json(openai_body(err, rid), err.status, headers)
        headers = {"X-Request-ID": rid, **self.pipeline.limit_headers(key)}
        window = self.settings.context_window_tokens
        listing = models.listing(self.router, key, window, self.caps)
        return _json(listing, headers=headers)

    async def _read(self, request: web.Request) -> bytes:
        limit = self.settings.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            raise PayloadTooLarge(f"body is larger than {limit} bytes")
        try:
            return await request.read()
        except web.HTTPRequestEntityTooLarge as exc:
            raise PayloadTooLarge(f"body is larger than {limit} bytes") from exc

    async def _serve(
        self,
        request: web.Request,
        route: str,
        parse: Callable[[bytes, Limits], Job],
        respond: Callable[[Job, list[str], RequestStats], BaseModel],
        error_body: Callable[[GatewayError, str], BaseModel],
        streamer: Streamer,
    ) -> web.StreamResponse:
        start = time.perf_counter()
        arrival = time.time()
        given = request.headers.get("X-Request-ID", "")
        rid = given if _REQUEST_ID.match(given) else secrets.token_hex(12)
        stats = RequestStats(request_id=rid, route=route)
        headers = {"X-Request-ID": rid}
        job: Job | None = None
        texts: list[str] = []
        body: BaseModel
        in_flight = self.metrics.in_flight.labels(route)
        in_flight.inc()
        key = None
        try:
            key = authenticate(self.keys, request.headers.get("Authorization"))
            stats.key_id = key.id
            raw = await self._read(request)
            try:
                job = parse(raw, self.limits)
            except GatewayError:
                stats.mode = _asked_mode(raw)  # a refused stream is still a stream
                raise
            stats.model = job.model
            stats.mode = "stream" if job.stream else "unary"  # also if refused before it starts
            self.pipeline.check_model(key, job.model)
            deadline = deadline_for(request.headers, start, self.settings)
            if job.stream:
                run = StreamRun(
                    self.pipeline, job, key, deadline, stats,
                    chunk_tokens=self.settings.stream_chunk_tokens,
                    first_chunk_tokens=self.settings.stream_first_chunk_tokens, arrived=start,
                    gone=lambda: _client_gone(request),
                    call=self.chunks.continue_ if self.chunks else None,
                )  # fmt: skip
                events = streamer(job, stats, run.progress)
                return await self._stream(request, run, events, headers, arrival, key)
            try:
                texts = await _unless_gone(request, self.pipeline.run(job, key, deadline, stats))
            except ClientGone:
                # the client hung up: the upstream call was cancelled, and the outcome is its own
                stats.disconnected = True
                stats.status, stats.error_code = CLIENT_GONE, "client_disconnected"
                stats.total_s = time.perf_counter() - start
                self._finish(stats, job, [], arrival)
                return web.Response(status=CLIENT_GONE)
            stats.total_s = time.perf_counter() - start
            body, status = respond(job, texts, stats), 200
            headers["X-Model-Version"] = stats.version
            if stats.version_label:
                headers["X-Model-Version-Label"] = stats.version_label
        except GatewayError as err:
            body, status = error_body(err, rid), err.status
            stats.error_code = err.code
            headers.update(err.response_headers())
        except Exception:  # noqa: BLE001 - a bug must still answer in the endpoint's shape
            log.exception("unhandled error", request_id=rid, route=route)
            internal = GatewayError("internal error")
            body, status = error_body(internal, rid), 500
            stats.error_code = internal.code
        finally:
            in_flight.dec()
        stats.status = status
        stats.total_s = time.perf_counter() - start
        self._finish(stats, job, texts, arrival)
        if key is not None:
            headers.update(self.pipeline.limit_headers(key))
        return _json(body, status, headers)

    async def _stream(
        self,
        request: web.Request,
        run: StreamRun,
        events: sse.StreamEvents,
        headers: dict[str, str],
        arrival: float,
        key: ApiKey,
    ) -> web.StreamResponse:
        """Answer one job with server-sent events. Up to the first chunk, a failure raises (the
        caller answers it with its status code); after it, it ends the stream with an error event.
        """
        stats = run.stats
        try:
            first = await run.start()
        except ClientGone:
            return self._gone(run, arrival)
        except BaseException:
            run.close()
            raise
        headers = {
            **headers, **sse.HEADERS, **self.pipeline.limit_headers(key),
            "X-Model-Version": stats.version,
        }  # fmt: skip
        if stats.version_label:
            headers["X-Model-Version-Label"] = stats.version_label
        resp = web.StreamResponse(status=200, headers=headers)
        try:
            await resp.prepare(request)
            await _write(resp, [*events.begin(), *events.pieces(first)])
            while not run.done:
                await _write(resp, events.pieces(await run.next()))
            run.close()
            await _write(resp, events.end())
            await resp.write(sse.DONE)
        except (ClientGone, ConnectionResetError):
            return self._gone(run, arrival, resp)
        except GatewayError as err:
            stats.status, stats.error_code = err.status, err.code
            await _write_quietly(resp, sse.error_event(err, stats.request_id))
        except Exception:  # noqa: BLE001 - a bug still ends the stream in the OpenAI shape
            log.exception("unhandled error", request_id=stats.request_id, route=stats.route)
            internal = GatewayError("internal error")
            stats.status, stats.error_code = 500, internal.code
            await _write_quietly(resp, sse.error_event(internal, stats.request_id))
        finally:
            run.close()
        self._close_stream(run, arrival)
        return resp

    def _gone(
        self, run: StreamRun, arrival: float, resp: web.StreamResponse | None = None
    ) -> web.StreamResponse:
        """The client left mid-stream: its own outcome (499, as nginx logs it), not an error."""
        run.close()
        run.stats.disconnected = True
        run.stats.status, run.stats.error_code = CLIENT_GONE, "client_disconnected"
        self._close_stream(run, arrival)
        return resp if resp is not None else web.Response(status=CLIENT_GONE)

    def _close_stream(self, run: StreamRun, arrival: float) -> None:
        run.stats.total_s = time.time() - arrival
        self._finish(run.stats, run.job, [r.text.sent for r in run.rows], arrival)

    async def feedback(self, request: web.Request) -> web.Response:
        """POST /v1/feedback: a score of a response this key got (see serving.gateway.feedback)."""
        arrival = time.time()
        given = request.headers.get("X-Request-ID", "")
        rid = given if _REQUEST_ID.match(given) else secrets.token_hex(12)
        headers = {"X-Request-ID": rid}
        try:
            key = authenticate(self.keys, request.headers.get("Authorization"))
            self.pipeline.take_request(key)  # feedback spends the key's request budget too
            raw = await self._read(request)
            req = feedback.parse(raw, self.settings.feedback_max_comment_chars)
            fb, matched = feedback.accept(req, key.id, self.recent, arrival)
        except GatewayError as err:
            headers.update(err.response_headers())
            return _json(native_body(err, rid), err.status, headers)
        except Exception:  # noqa: BLE001 - a bug must still answer in the native shape
            log.exception("unhandled error", request_id=rid, route="feedback")
            return _json(native_body(GatewayError("internal error"), rid), 500, headers)
        self.metrics.observe_feedback(fb.model, fb.version, fb.score_class)
        self.samples.offer(fb)
        body = feedback.FeedbackResponse(
            response_id=fb.response_id,
            score_class=fb.score_class,  # type: ignore[arg-type]
            matched=matched,
        )
        return _json(body, 202, {**headers, **self.pipeline.limit_headers(key)})

    def _finish(
        self, stats: RequestStats, job: Job | None, texts: list[str], arrival: float
    ) -> None:
        self.metrics.observe(stats)
        self.recent.remember(
            stats.request_id, stats.model, stats.version, stats.version_label, stats.key_id
        )
        if self.settings.access_log:
            log.info(
                "request",
                request_id=stats.request_id,
                key_id=stats.key_id,
                route=stats.route,
                model=stats.model,
                version=stats.version,
                version_label=stats.version_label,
                status=stats.status,
                error_code=stats.error_code,
                queue_wait_s=round(stats.queue_wait_s, 6),
                upstream_s=round(stats.upstream_s, 6),
                total_s=round(stats.total_s, 6),
                prompt_tokens=stats.prompt_tokens,
                output_tokens=stats.output_tokens,
            )
        if self.samples.discards:
            return
        self.samples.offer(
            Sample(
                stats=stats,
                prompts=tuple(job.prompts) if job else (),
                outputs=tuple(texts),
                params=job.params() if job else {},
                timestamp=arrival,
            )
        )

    def app(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application(
            client_max_size=self.settings.max_body_bytes, middlewares=[json_route_errors]
        )
        app[GATEWAY_KEY] = self
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/health", self.health)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/metrics", self.metrics_page)
        app.router.add_get("/openapi.json", self.openapi)
        app.router.add_post("/v1/generate", self.generate)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_get("/v1/models", self.list_models)
        app.router.add_post("/v1/feedback", self.feedback)
        admin.install(app, self.router, self.settings)  # the canary weight file, if any
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        return app


def _asked_mode(raw: bytes) -> str:
    """The mode a refused body asked for: "stream" for `"stream": true`, else "unary"."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return "unary"
    return "stream" if isinstance(body, dict) and body.get("stream") is True else "unary"


def _client_gone(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


async def _unless_gone(request: web.Request, call: Awaitable[T]) -> T:
    """Await `call`, cancelling it (and with it the upstream call) when the client hangs up, as
    a stream's chunk is; raises ClientGone then."""
    task = asyncio.ensure_future(call)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if done:
                return task.result()
            if _client_gone(request):
                raise ClientGone("client disconnected")
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _write(resp: web.StreamResponse, events: list[BaseModel]) -> None:
    if events:
        await resp.write(b"".join(sse.event(e) for e in events))


async def _write_quietly(resp: web.StreamResponse, data: bytes) -> None:
    try:
        await resp.write(data + sse.DONE)
    except ConnectionResetError:
        pass  # the client left as well
