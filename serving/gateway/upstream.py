"""TF Serving over REST: `:predict` on an explicit version, and the model status document."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from serving.model.signature import OUTPUTS, SIGNATURE_NAME


class UpstreamError(Exception):
    """Base of upstream call failures; `counts_as_failure` feeds the circuit breaker."""

    counts_as_failure = True

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class UpstreamUnreachable(UpstreamError):
    """Connection refused/reset: the model server is down."""


class UpstreamTimeout(UpstreamError):
    """No answer within the request's remaining deadline."""


class UpstreamHTTPError(UpstreamError):
    """A non-200 answer, with TF Serving's `{"error": ...}` message."""


class UpstreamBadResponse(UpstreamError):
    """A 200 whose body does not match the signature contract."""


@dataclass(frozen=True)
class Prediction:
    """One row of the `serving_default` outputs."""

    text: str
    prompt_tokens: int
    output_tokens: int
    finish_reason: str
    mean_nll: float
    truncated_prompt_tokens: int


def _decode_text(value: Any) -> str:
    if isinstance(value, dict) and "b64" in value:  # TF Serving's binary string encoding
        return base64.b64decode(value["b64"]).decode("utf-8", "replace")
    if not isinstance(value, str):
        raise UpstreamBadResponse("text output is not a string")
    return value


def parse_predictions(doc: Any, rows: int) -> list[Prediction]:
    """Check and convert a row-format `{"predictions": [...]}` answer."""
    preds = doc.get("predictions") if isinstance(doc, dict) else None
    if not isinstance(preds, list) or len(preds) != rows:
        raise UpstreamBadResponse(f"expected {rows} predictions")
    out: list[Prediction] = []
    for row in preds:
        if not isinstance(row, dict) or not set(OUTPUTS) <= set(row):
            raise UpstreamBadResponse("prediction row lacks signature outputs")
        try:
            out.append(
                Prediction(
                    text=_decode_text(row["text"]),
                    prompt_tokens=int(row["prompt_tokens"]),
                    output_tokens=int(row["output_tokens"]),
                    finish_reason=_decode_text(row["finish_reason"]),
                    mean_nll=float(row["mean_nll"]),
                    truncated_prompt_tokens=int(row["truncated_prompt_tokens"]),
                )
            )
        except (TypeError, ValueError) as exc:
            raise UpstreamBadResponse("prediction row has wrong types") from exc
    return out


class TFServingClient:
    """One pooled aiohttp session to the upstream REST port."""

    def __init__(self, base_url: str, pool_size: int = 100) -> None:
        self.base_url = base_url.rstrip("/")
        self._pool_size = pool_size
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        """Open the connection pool (inside the running loop)."""
        connector = aiohttp.TCPConnector(limit=self._pool_size, keepalive_timeout=30)
        self._session = aiohttp.ClientSession(
            connector=connector, json_serialize=json.dumps, skip_auto_headers=("User-Agent",)
        )

    async def close(self) -> None:
        """Close the pool."""
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        """The open session."""
        if self._session is None:
            raise RuntimeError("client not started")
        return self._session

    async def _call(self, method: str, url: str, timeout_s: float, body: bytes | None) -> Any:
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        headers = {"Content-Type": "application/json"} if body is not None else None
        try:
            async with self.session.request(
                method, url, data=body, headers=headers, timeout=timeout
            ) as resp:
                raw = await resp.read()
                status = resp.status
        except TimeoutError as exc:
            raise UpstreamTimeout(f"no answer within {timeout_s:.3g}s") from exc
        except (aiohttp.ClientConnectionError, OSError) as exc:
            raise UpstreamUnreachable(f"cannot reach upstream: {type(exc).__name__}") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamBadResponse(f"upstream protocol error: {type(exc).__name__}") from exc
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise UpstreamBadResponse(f"upstream answered {status} with non-json") from exc
        if status != 200:
            message = doc.get("error") if isinstance(doc, dict) else None
            raise UpstreamHTTPError(str(message or f"upstream answered {status}"), status)
        return doc

    async def predict(
        self, model: str, version: int, rows: list[dict[str, Any]], timeout_s: float
    ) -> tuple[list[Prediction], float]:
        """Run rows on one version; returns predictions and upstream seconds."""
        url = f"{self.base_url}/v1/models/{model}/versions/{version}:predict"
        body = json.dumps({"signature_name": SIGNATURE_NAME, "instances": rows}).encode()
        start = time.perf_counter()
        doc = await self._call("POST", url, timeout_s, body)
        return parse_predictions(doc, len(rows)), time.perf_counter() - start

    async def available_versions(self, model: str, timeout_s: float = 2.0) -> list[int]:
        """Versions of `model` in state AVAILABLE ([] when it has none)."""
        try:
            doc = await self._call("GET", f"{self.base_url}/v1/models/{model}", timeout_s, None)
        except UpstreamHTTPError as exc:
            if exc.status == 404:
                return []
            raise
        statuses = doc.get("model_version_status", []) if isinstance(doc, dict) else []
        versions: list[int] = []
        for entry in statuses if isinstance(statuses, list) else []:
            if isinstance(entry, dict) and entry.get("state") == "AVAILABLE":
                try:
                    versions.append(int(entry["version"]))
                except (KeyError, TypeError, ValueError):
                    continue
        return versions


async def cancel_quietly(task: asyncio.Task[Any] | None) -> None:
    """Cancel a background task and wait for it."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down either way
        pass
