"""TF Serving's REST API (`/v1/models/...`) and its Prometheus page, on aiohttp.

Routing, messages, status codes and metric recording follow `model_servers/http_server.cc`,
`http_rest_api_handler.cc` and `http_rest_api_util.cc`.
"""

from __future__ import annotations

import asyncio
import re
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from aiohttp import web

from serving.modelserver.manager import ModelManager
from serving.modelserver.memory import release_free_memory
from serving.modelserver.metrics import ServingMetrics
from serving.modelserver.predict import Predictor, check_output_filter
from serving.modelserver.protos import metadata_json, status_json
from serving.modelserver.status import HTTP_STATUS, ServingError, invalid_argument
from serving.modelserver.tensors import error_json, outputs_to_json, parse_predict_body
from tokenpulse.logging import get_logger
from tokenpulse.tfserving.predict import DEFAULT_SIGNATURE

PREDICT_RE = re.compile(
    r"(?i)/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?:"
    r"(classify|regress|predict)"
)
STATUS_RE = re.compile(
    r"(?i)/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:/(metadata))?"
)
V1_RE = re.compile(r"(?i)/v1/.*")
INT64_MAX = 2**63 - 1
JSON = "application/json"
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
LARGE_BODY_BYTES = 1024 * 1024  # after a body this big, hand freed memory back to the OS
JSON_THREADS = 2
log = get_logger(__name__)


class BodyTooLarge(ServingError):
    """A request body over `--rest_api_max_body_bytes`: 413, in TF Serving's error shape."""

    def __init__(self, declared: int | None, limit: int) -> None:
        size = f"of {declared} bytes " if declared is not None else ""
        super().__init__(
            "RESOURCE_EXHAUSTED",
            f"Request body {size}exceeds the limit of {limit} bytes (--rest_api_max_body_bytes)",
        )

    @property
    def http_status(self) -> int:
        """413 Content Too Large."""
        return 413


class RestApi:
    """The request handlers; one instance per server."""

    def __init__(
        self,
        manager: ModelManager,
        predictor: Predictor,
        metrics: ServingMetrics,
        timeout_ms: int,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.manager = manager
        self.predictor = predictor
        self.metrics = metrics
        self.timeout_s = timeout_ms / 1000 if timeout_ms > 0 else None
        self.max_body_bytes = max_body_bytes
        # with batching on, more rows than max_batch_size are refused before they are converted
        scheduler = predictor.scheduler
        self._max_rows = scheduler.params.max_batch_size if scheduler is not None else None
        self._json_pool = ThreadPoolExecutor(max_workers=JSON_THREADS, thread_name_prefix="json")

    async def handle_v1(self, request: web.Request) -> web.Response:
        """Every `/v1/...` request: dispatch, answer, record request_count/request_latency."""
        start = time.perf_counter()
        path = request.rel_url.raw_path
        if not V1_RE.fullmatch(path):
            return web.Response(status=404, text="")
        info: dict[str, str] = {"model_name": "", "api": ""}
        try:
            body = await self._dispatch(request, path, info)
            status, code = 200, "OK"
        except ServingError as exc:
            body, status, code = error_json(exc.message), exc.http_status, exc.code
        except Exception as exc:  # never a stack trace to the client
            log.exception("rest request failed", path=path)
            body, status, code = error_json(f"internal error: {exc}"), 500, "INTERNAL"
        model_label = self.manager.metric_label(info["model_name"])
        if status == 200:
            self.metrics.request_latency.observe(
                int((time.perf_counter() - start) * 1e6), model_label, info["api"], "REST"
            )
        self.metrics.request_count.inc(model_label, code)
        if "large_body" in info:
            # the request's objects are garbage now (an error's traceback kept them until here)
            await asyncio.get_running_loop().run_in_executor(self._json_pool, release_free_memory)
        return web.Response(status=status, body=body.encode(errors="replace"), content_type=JSON)

    async def _dispatch(self, request: web.Request, path: str, info: dict[str, str]) -> str:
        method = request.method
        if method == "OPTIONS":
            if re.search(r"https?://", request.headers.get("Origin", "")):
                return ""
            raise ServingError("FAILED_PRECONDITION", "Origin header is missing in CORS preflight")
        match = None
        if method == "POST":
            match = PREDICT_RE.fullmatch(path)
        elif method == "GET":
            match = STATUS_RE.fullmatch(path)
        if match is None:
            raise invalid_argument(f"Malformed request: {method} {path}")
        name = urllib.parse.unquote(match.group(1) or "")
        info["model_name"] = name
        version = _version(match.group(2)) if match.group(2) else None
        label = urllib.parse.unquote(match.group(3)) if match.group(3) else None
        if method == "POST":
            verb = match.group(4)
            info["api"] = verb
            _check_version_and_label(version, label)
            if verb == "predict":
                return await self._predict(request, name, version, label, info)
            if verb in ("classify", "regress"):
                raise ServingError("UNIMPLEMENTED", f"{verb} is not supported by this model server")
            raise invalid_argument(f"Malformed request: {method} {path}")
        if not name:
            raise invalid_argument("Missing model name in request.")
        _check_version_and_label(version, label)
        if match.group(4):
            return self._metadata(name, version, label)
        # A /labels/ segment is ignored by the status API.
        return status_json(name, self.manager.version_states(name, version))

    def _metadata(self, name: str, version: int | None, label: str | None) -> str:
        servable = self.manager.resolve(name, version, label)
        try:
            return metadata_json(servable)
        finally:
            servable.release()

    async def _predict(
        self,
        request: web.Request,
        name: str,
        version: int | None,
        label: str | None,
        info: dict[str, str],
    ) -> str:
        body = await self._read_body(request)
        if len(body) >= LARGE_BODY_BYTES:
            info["large_body"] = "yes"
        loop = asyncio.get_running_loop()
        servable = self.manager.resolve(name, version, label)
        try:
            # Decoding a big body takes long enough to stall every other request if it ran on
            # the event loop; the small pool also bounds how many bodies are decoded at once.
            signature, inputs, fmt = await loop.run_in_executor(
                self._json_pool,
                partial(parse_predict_body, max_rows=self._max_rows),
                body,
                partial(_input_dtypes, servable),
            )
            del body
            sig = servable.signature(signature)
            run = self.predictor.run_async(name, servable, signature, inputs)
            try:
                outputs = await asyncio.wait_for(run, self.timeout_s)
            except TimeoutError as exc:
                raise ServingError("DEADLINE_EXCEEDED", "Deadline Exceeded") from exc
            wanted = check_output_filter(sig, [])
            return await loop.run_in_executor(
                self._json_pool,
                outputs_to_json,
                {k: outputs[k] for k in wanted},
                {k: sig.outputs[k] for k in wanted},
                fmt,
            )
        finally:
            servable.release()

    async def _read_body(self, request: web.Request) -> bytes:
        """The body, refused before it is read when its declared length is over the limit."""
        declared = request.content_length
        if declared is not None and declared > self.max_body_bytes:
            raise BodyTooLarge(declared, self.max_body_bytes)
        try:
            return await request.read()
        except web.HTTPRequestEntityTooLarge as exc:  # chunked bodies: aiohttp's own cap
            raise BodyTooLarge(None, self.max_body_bytes) from exc

    async def handle_metrics(self, request: web.Request) -> web.Response:
        """The Prometheus page, rendered off the event loop."""
        text = await asyncio.get_running_loop().run_in_executor(
            self._json_pool, self.metrics.render
        )
        return web.Response(body=text.encode(), headers={"Content-Type": "text/plain"})

    def close(self) -> None:
        """Stop the JSON worker threads."""
        self._json_pool.shutdown(wait=False, cancel_futures=True)


def _version(text: str) -> int:
    """A version path segment as int64, worded like TF Serving when it does not fit."""
    if len(text.lstrip("0")) > len(str(INT64_MAX)) or int(text) > INT64_MAX:
        raise invalid_argument(f"Failed to convert version: {text[:64]} to numeric.")
    return int(text)


def _check_version_and_label(version: int | None, label: str | None) -> None:
    if version is not None and label is not None:
        raise invalid_argument(
            f"Both model version ({version}) and model version label ({label}) cannot be supplied."
        )


def _input_dtypes(servable: Any, signature: str) -> dict[str, int]:
    key = signature or DEFAULT_SIGNATURE
    if key not in servable.signatures:
        raise invalid_argument(f'Serving signature name: "{key}" not found in signature def')
    return dict(servable.signatures[key].inputs)


def build_app(api: RestApi, metrics_path: str | None) -> web.Application:
    """The aiohttp application: the metrics page (if enabled) and the `/v1` catch-all."""
    app = web.Application(client_max_size=api.max_body_bytes)
    if metrics_path:
        app.router.add_get(metrics_path, api.handle_metrics)
    app.router.add_route("*", "/{tail:.*}", api.handle_v1)
    return app


__all__ = ["HTTP_STATUS", "RestApi", "build_app"]
