"""A stand-in for TF Serving's REST API, for tests and benchmarks: clearly not the real thing.

Tests of the gateway and the exporter need an upstream they can make slow, failing, malformed or
dead on cue; end-to-end tests use the project's real model server instead. The stand-in speaks the
same wire contract as TF Serving on 127.0.0.1:

- `GET /v1/models/{m}[/versions/{v}]`: the model status document, newest version first, each entry
  `{"version": "<v>", "state": ..., "status": {"error_code": ..., "error_message": ...}}`; 404 with
  "Could not find any versions of model {m}" for a model without versions.
- `POST /v1/models/{m}[/versions/{v}|/labels/{l}]:predict` with row-format `instances` and
  `signature_name` "serving_default" (absent also means the default signature): one prediction
  per row with the `serving_default` outputs; 404 "Servable not found for request: ..." for a
  version that is not AVAILABLE; 400 for unknown inputs or a missing `prompt`.
- Errors as TF Serving writes them: `{"error": "<message>"}`.

It is not a model server: each prediction is whatever the test put in `state.answers` for that
prompt, else `f"{state.text} (v{version})"`. Tests change `state` while it runs; `stop()` refuses
connections until `start()` listens again on the same port.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from devtools.standins.background import BackgroundServer, BackgroundStandin
from devtools.tfserving_protocol import status_document
from tokenpulse.tfserving.errors import error_body
from tokenpulse.tfserving.predict import DEFAULT_SIGNATURE
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME, FINISH_LENGTH, INPUTS
from tokenpulse.tfserving.status import VersionStatus

_PREDICT = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+)|/labels/([^/:]+))?:predict$")


@dataclass
class StandinState:
    """What the stand-in serves and how it misbehaves; tests mutate it while it runs."""

    # model -> version -> state (START, LOADING, AVAILABLE, UNLOADING, END)
    versions: dict[str, dict[int, str]] = field(
        default_factory=lambda: {DEFAULT_MODEL_NAME: {1: "AVAILABLE"}}
    )
    # model -> label -> version
    labels: dict[str, dict[str, int]] = field(default_factory=dict)
    # (model, version) -> (error_code, error_message) in the status of that version
    errors: dict[tuple[str, int], tuple[str, str]] = field(default_factory=dict)
    # (model, version) -> prompt -> (text, mean_nll); other prompts get the default answer
    answers: dict[tuple[str, int], dict[str, tuple[str, float]]] = field(default_factory=dict)
    # status answers: "ok", "malformed" (not JSON), "wrong_shape" (JSON without the list), "error"
    status_mode: str = "ok"
    delay_s: float = 0.0  # before answering a predict
    # A server with a capacity: each predict holds one of `max_concurrency` slots (None: no
    # limit) for `service_time_s`, waiting in FIFO order for a free slot, so it serves at most
    # max_concurrency / service_time_s predicts per second (load tests' known capacity).
    service_time_s: float = 0.0
    max_concurrency: int | None = None
    fail_status: int | None = None  # answer every predict with this HTTP status
    text: str = "hello world"  # the default answer is f"{text} (v{version})"
    finish_reason: str = FINISH_LENGTH
    mean_nll: float = 1.5
    output_tokens: int | None = None  # None: the row's max_new_tokens (else the text's length)
    bytes_per_token: int = 1  # a prompt's tokens: its bytes over this, rounded up (a subword model)


def _error(status: int, message: str) -> web.Response:
    return web.json_response(error_body(message), status=status)


class TfServingStandin(BackgroundStandin):
    """`with TfServingStandin() as tfs:` serves `tfs.state` at `tfs.url` from its own thread."""

    def __init__(self, state: StandinState | None = None) -> None:
        self.state = state or StandinState()
        self.calls: Counter[str] = Counter()  # "status", "predict:v<version>"
        self._slots: asyncio.Semaphore | None = None  # made in the server's loop
        self._server = BackgroundServer(self._app, name="tfserving-standin")

    def predict_calls(self) -> int:
        """Predict calls received so far."""
        return sum(n for k, n in self.calls.items() if k.startswith("predict"))

    def status_doc(self, model: str) -> web.Response:
        """The status answer for `model`, shaped by `state.status_mode`."""
        self.calls["status"] += 1
        s = self.state
        if s.status_mode == "error":
            return _error(500, "stand-in told to fail")
        if s.status_mode == "malformed":
            return web.Response(text="{not json", content_type="application/json")
        if s.status_mode == "wrong_shape":
            return web.json_response({"model_version_status": "nope"})
        versions = s.versions.get(model, {})
        if not versions:
            return _error(404, f"Could not find any versions of model {model}")
        statuses = [
            VersionStatus(version, state, *s.errors.get((model, version), ("OK", "")))
            for version, state in versions.items()
        ]
        return web.json_response(status_document(statuses))

    def _resolve(self, model: str, version: str | None, label: str | None) -> int | None:
        if version is not None:
            return int(version)
        if label is not None:
            return self.state.labels.get(model, {}).get(label)
        available = [v for v, st in self.state.versions.get(model, {}).items() if st == "AVAILABLE"]
        return max(available) if available else None

    def _prediction(self, model: str, version: int, row: dict[str, Any]) -> dict[str, Any]:
        s = self.state
        prompt = str(row["prompt"])
        answer = s.answers.get((model, version), {}).get(prompt)
        text, nll = answer if answer is not None else (f"{s.text} (v{version})", s.mean_nll)
        tokens = s.output_tokens
        if tokens is None:
            tokens = int(row.get("max_new_tokens", len(text)))
        return {
            "text": text,
            "mean_nll": nll,
            "prompt_tokens": -(-len(prompt.encode()) // s.bytes_per_token),
            "output_tokens": tokens,
            "finish_reason": s.finish_reason,
            "truncated_prompt_tokens": 0,
        }

    async def _status(self, request: web.Request) -> web.Response:
        return self.status_doc(request.match_info["model"])

    async def _predict(self, request: web.Request) -> web.Response:
        m = _PREDICT.match(request.path)
        if m is None:
            return _error(400, f"Malformed request: POST {request.path}")
        model, s = m.group(1), self.state
        version = self._resolve(model, m.group(2), m.group(3))
        self.calls[f"predict:v{version}"] += 1
        if s.delay_s:
            await asyncio.sleep(s.delay_s)
        if s.service_time_s:
            await self._serve_time(s.service_time_s, s.max_concurrency)
        if s.fail_status is not None:
            return _error(s.fail_status, "stand-in told to fail")
        if version is None or s.versions.get(model, {}).get(version) != "AVAILABLE":
            return _error(404, f"Servable not found for request: Specific({model}, {version})")
        try:
            doc = json.loads(await request.read())
        except ValueError:
            return _error(400, "JSON Parse error")
        rows = doc.get("instances") if isinstance(doc, dict) else None
        if (
            not isinstance(rows, list)
            or doc.get("signature_name", DEFAULT_SIGNATURE) != DEFAULT_SIGNATURE
        ):
            return _error(400, "Missing 'inputs' or 'instances' key, or an unknown signature")
        for row in rows:
            if not isinstance(row, dict) or "prompt" not in row or not set(row) <= set(INPUTS):
                return _error(400, f"each instance needs a prompt and only inputs {list(INPUTS)}")
        return web.json_response(
            {"predictions": [self._prediction(model, version, r) for r in rows]}
        )

    async def _serve_time(self, seconds: float, slots: int | None) -> None:
        if slots is None:
            await asyncio.sleep(seconds)
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(slots)
        async with self._slots:
            await asyncio.sleep(seconds)

    def _app(self) -> web.Application:
        self._slots = None  # a restart has a new event loop
        app = web.Application()
        app.router.add_get("/v1/models/{model}", self._status)
        app.router.add_get("/v1/models/{model}/versions/{version}", self._status)
        app.router.add_post("/{tail:.*}", self._predict)
        return app
