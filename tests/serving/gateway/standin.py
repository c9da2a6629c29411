"""A stand-in for TF Serving's REST API (REFERENCE.md §A.5), clearly not the real thing.

Unit-level protection tests need an upstream they can make slow, failing or dead on cue; the
end-to-end tests use the project's real model server instead. This speaks the same contract:
`GET /v1/models/{m}` status, `POST /v1/models/{m}[/versions/{v}|/labels/{l}]:predict` with row
`instances`, and TF Serving's `{"error": ...}` bodies.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from serving.model.signature import INPUTS

_PREDICT = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+)|/labels/([^/:]+))?:predict$")


@dataclass
class Behaviour:
    """What the stand-in does now; tests change it between requests."""

    versions: dict[int, str] = field(default_factory=lambda: {1: "AVAILABLE"})
    labels: dict[str, int] = field(default_factory=dict)
    delay_s: float = 0.0
    fail_status: int | None = None  # answer every predict with this status
    text: str = "hello world"  # each output is f"{text} (v{version})"
    finish_reason: str = "length"
    mean_nll: float = 1.5
    output_tokens: int | None = None  # None: max_new_tokens


class TFServingStandIn:
    """Runs in a background thread on 127.0.0.1; start(), stop(), and start() again (same port)."""

    def __init__(self, model: str = "gen") -> None:
        self.model = model
        self.behaviour = Behaviour()
        self.calls: Counter[str] = Counter()  # "predict:v1", "status"
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base REST URL."""
        return f"http://127.0.0.1:{self.port}"

    def predict_calls(self) -> int:
        """Predict calls received so far."""
        return sum(n for k, n in self.calls.items() if k.startswith("predict"))

    async def _status(self, request: web.Request) -> web.Response:
        self.calls["status"] += 1
        if request.match_info["model"] != self.model:
            return web.json_response(
                {"error": f"Could not find any versions of model {request.match_info['model']}"},
                status=404,
            )
        versions = sorted(self.behaviour.versions.items(), reverse=True)
        return web.json_response(
            {
                "model_version_status": [
                    {
                        "version": str(v),
                        "state": s,
                        "status": {"error_code": "OK", "error_message": ""},
                    }
                    for v, s in versions
                ]
            }
        )

    def _resolve(self, version: str | None, label: str | None) -> int | None:
        b = self.behaviour
        if version is not None:
            return int(version)
        if label is not None:
            return b.labels.get(label)
        available = [v for v, s in b.versions.items() if s == "AVAILABLE"]
        return max(available) if available else None

    async def _predict(self, request: web.Request) -> web.Response:
        m = _PREDICT.match(request.path)
        if m is None:
            return web.json_response(
                {"error": f"Malformed request: POST {request.path}"}, status=400
            )
        b = self.behaviour
        version = self._resolve(m.group(2), m.group(3))
        self.calls[f"predict:v{version}"] += 1
        if b.delay_s:
            await asyncio.sleep(b.delay_s)
        if b.fail_status is not None:
            return web.json_response({"error": "stand-in failure"}, status=b.fail_status)
        if m.group(1) != self.model or version is None or b.versions.get(version) != "AVAILABLE":
            return web.json_response(
                {"error": f"Servable not found for request: Specific({m.group(1)}, {version})"},
                status=404,
            )
        doc = await request.json()
        rows = doc.get("instances")
        if doc.get("signature_name") != "serving_default" or not isinstance(rows, list):
            return web.json_response({"error": "bad request"}, status=400)
        preds = []
        for row in rows:
            if set(row) != set(INPUTS):
                return web.json_response({"error": "missing inputs"}, status=400)
            preds.append(
                {
                    "text": f"{b.text} (v{version})",
                    "prompt_tokens": len(row["prompt"]),
                    "output_tokens": (
                        row["max_new_tokens"] if b.output_tokens is None else b.output_tokens
                    ),
                    "finish_reason": b.finish_reason,
                    "mean_nll": b.mean_nll,
                    "truncated_prompt_tokens": 0,
                }
            )
        return web.json_response({"predictions": preds})

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models/{model}", self._status)
        app.router.add_post("/{tail:.*}", self._predict)
        return app

    def start(self) -> None:
        """Listen (on the previous port when restarting)."""
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        async def boot() -> None:
            self._runner = web.AppRunner(self._app(), access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
            await site.start()
            self.port = self._runner.addresses[0][1]
            ready.set()

        def main() -> None:
            assert self._loop is not None
            self._loop.run_until_complete(boot())
            self._loop.run_forever()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("stand-in did not start")

    def stop(self) -> None:
        """Stop listening: connections are refused until start() again."""
        if self._loop is None or self._runner is None:
            return
        fut = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
        fut.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()
        self._loop = None
        self._runner = None

    def __enter__(self) -> TFServingStandIn:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
