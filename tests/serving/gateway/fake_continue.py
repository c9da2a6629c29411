"""A TF Serving REST stand-in that speaks `continue` as well as `serving_default`, for the
gateway's streaming tests: each prompt has one fixed byte output (`outputs`), which
`serving_default` returns whole and `continue` returns `chunk` bytes at a time from `step`, so a
test knows exactly where the chunk boundaries fall. The real model's `continue` is tested against
the real model server in test_streaming_e2e.py.
"""

from __future__ import annotations

import asyncio
import base64
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from devtools.standins.background import BackgroundServer, BackgroundStandin
from devtools.tfserving_protocol import status_document
from tokenpulse.tfserving.signature import (
    CONTINUE_INPUTS,
    CONTINUE_SIGNATURE_NAME,
    FINISH_LENGTH,
    FINISH_NONE,
    FINISH_STOP,
    INPUTS,
    RESUME_INPUTS,
    SIGNATURE_NAME,
)
from tokenpulse.tfserving.status import VersionStatus

NLL_PER_TOKEN = 0.5
# what TF Serving says when a version cannot run a well-formed request (FAILED_PRECONDITION)
REFUSAL = "Failed precondition: the version's session is not initialized"


@dataclass
class FakeState:
    """What it answers; tests change it while it runs."""

    outputs: dict[str, bytes] = field(default_factory=dict)  # prompt -> the whole output
    default: bytes = b"hello world"
    delay_s: float = 0.0  # before each answer
    fail_from_call: int | None = None  # continue calls from this one (1-based) answer 500
    window_drop: int = 0  # truncated_prompt_tokens to report
    bytes_per_token: int = 1  # a prompt's tokens: its bytes over this, rounded up (a subword model)
    no_continue: bool = False  # an export from before streaming: TF Serving's 400 for it
    resumes: bool = True  # `continue` takes `generated_ids` (False: an export from before it)
    # continue calls from this one (1-based) are refused as TF Serving refuses a request its
    # version cannot run: 400 (FAILED_PRECONDITION), although the gateway validated it
    reject_from_call: int | None = None


class FakeContinue(BackgroundStandin):
    """`with FakeContinue() as up:` serves model `gen` version 1 at `up.url`."""

    def __init__(self, state: FakeState | None = None) -> None:
        self.state = state or FakeState()
        self.calls: Counter[str] = Counter()  # "status", "predict", "continue"
        self.cancelled = 0  # continue calls whose caller closed the connection before the answer
        self._server = BackgroundServer(self._app, name="fake-continue")

    def _continue_inputs(self) -> dict[str, str]:
        if self.state.resumes:
            return CONTINUE_INPUTS
        return {k: v for k, v in CONTINUE_INPUTS.items() if k not in RESUME_INPUTS}

    def _output(self, prompt: str) -> bytes:
        return self.state.outputs.get(prompt, self.state.default)

    async def _status(self, request: web.Request) -> web.Response:
        self.calls["status"] += 1
        return web.json_response(status_document([VersionStatus(1, "AVAILABLE", "OK", "")]))

    async def _metadata(self, request: web.Request) -> web.Response:
        """TF Serving's metadata document: the signatures and their inputs (no `continue` when
        `no_continue`, as an export from before streaming)."""
        self.calls["metadata"] += 1
        signatures = {SIGNATURE_NAME: INPUTS}
        if not self.state.no_continue:
            signatures[CONTINUE_SIGNATURE_NAME] = self._continue_inputs()
        defs = {
            name: {"inputs": {i: {"name": f"{name}_{i}:0"} for i in inputs}, "outputs": {}}
            for name, inputs in signatures.items()
        }
        version = request.match_info["version"]
        spec = {"name": request.match_info["model"], "version": version}
        return web.json_response({"model_spec": spec, "metadata": {"signature_def": {
            "signature_def": defs}}})  # fmt: skip

    async def _predict(self, request: web.Request) -> web.Response:
        doc = await request.json()
        signature = doc.get("signature_name", SIGNATURE_NAME)
        rows = doc["instances"]
        if signature == CONTINUE_SIGNATURE_NAME:
            self.calls["continue"] += 1
            n = self.calls["continue"]
            if self.state.no_continue:
                error = 'Serving signature key "continue" not found.'
                return web.json_response({"error": error}, status=400)
            await asyncio.sleep(self.state.delay_s)
            if request.transport is None or request.transport.is_closing():
                self.cancelled += 1  # the gateway closed the call's connection: cancelled
            if self.state.reject_from_call is not None and n >= self.state.reject_from_call:
                return web.json_response({"error": REFUSAL}, status=400)
            if self.state.fail_from_call is not None and n >= self.state.fail_from_call:
                return web.json_response({"error": "fake told to fail"}, status=500)
            if any(set(row) != set(self._continue_inputs()) for row in rows):
                return web.json_response({"error": "continue needs every input"}, status=400)
            return web.json_response({"predictions": [self._chunk(row) for row in rows]})
        self.calls["predict"] += 1
        await asyncio.sleep(self.state.delay_s)
        return web.json_response({"predictions": [self._whole(row) for row in rows]})

    def _prompt_tokens(self, prompt: str) -> int:
        return -(-len(prompt.encode()) // self.state.bytes_per_token)

    def _whole(self, row: dict[str, Any]) -> dict[str, Any]:
        out = self._output(row["prompt"])[: row["max_new_tokens"]]
        finish = FINISH_LENGTH if len(out) == row["max_new_tokens"] else FINISH_STOP
        return {
            "text": out.decode("utf-8", "replace"),
            "prompt_tokens": self._prompt_tokens(row["prompt"]),
            "output_tokens": len(out),
            "finish_reason": finish,
            "mean_nll": NLL_PER_TOKEN,
            "truncated_prompt_tokens": self.state.window_drop,
        }

    def _chunk(self, row: dict[str, Any]) -> dict[str, Any]:
        generated = base64.b64decode(row["generated"]["b64"])
        full = self._output(row["prompt"])[: row["max_new_tokens"]]
        assert full.startswith(generated) and row["step"] == len(generated)
        if self.state.resumes:  # its tokens are bytes: the ids handed back are the bytes
            assert [int(t) for t in row["generated_ids"].split()] == list(generated)
        piece = full[row["step"] : row["step"] + row["chunk"]]
        end = row["step"] + len(piece)
        if end == row["max_new_tokens"]:
            finish = FINISH_LENGTH
        elif end == len(full):
            finish = FINISH_STOP
        else:
            finish = FINISH_NONE
        scored = len(piece) + (finish == FINISH_STOP)
        return {
            "tokens": list(piece) + [0] * (row["chunk"] - len(piece)),
            "n_tokens": len(piece),
            **({"token_ids": " ".join(map(str, piece))} if self.state.resumes else {}),
            "finish_reason": finish,
            "nll_sum": NLL_PER_TOKEN * scored,
            "n_scored": scored,
            "prompt_tokens": self._prompt_tokens(row["prompt"]),
            "truncated_prompt_tokens": self.state.window_drop,
        }

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models/{model}", self._status)
        app.router.add_get("/v1/models/{model}/versions/{version}/metadata", self._metadata)
        app.router.add_post("/{tail:.*}", self._predict)
        return app
