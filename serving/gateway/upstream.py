"""TF Serving over REST: `:predict` on an explicit version, and the model status document."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from tokenpulse.tfserving.errors import TfServingBadResponse as UpstreamBadResponse
from tokenpulse.tfserving.errors import TfServingError as UpstreamError
from tokenpulse.tfserving.errors import TfServingHttpError as UpstreamHTTPError
from tokenpulse.tfserving.errors import TfServingTimeout as UpstreamTimeout
from tokenpulse.tfserving.errors import TfServingUnreachable as UpstreamUnreachable
from tokenpulse.tfserving.errors import error_message
from tokenpulse.tfserving.predict import decode_text, predict_path, row_request
from tokenpulse.tfserving.predict import parse_predictions as parse_rows
from tokenpulse.tfserving.signature import (
    CONTINUE_OUTPUTS,
    CONTINUE_SIGNATURE_NAME,
    FINISH_STOP,
    NO_STOP,
    OUTPUTS,
    RESUME_OUTPUTS,
    SIGNATURE_NAME,
    STOP_OUTPUTS,
    parse_ids,
)
from tokenpulse.tfserving.status import available_versions, parse_model_status, status_path

__all__ = [
    "Chunk",
    "Prediction",
    "TFServingClient",
    "UpstreamBadResponse",
    "UpstreamError",
    "UpstreamHTTPError",
    "UpstreamTimeout",
    "UpstreamUnreachable",
    "cancel_quietly",
    "parse_chunks",
    "parse_predictions",
]


@dataclass(frozen=True)
class Prediction:
    """One row of the `serving_default` outputs."""

    text: str
    prompt_tokens: int
    output_tokens: int
    finish_reason: str
    mean_nll: float
    truncated_prompt_tokens: int


def parse_predictions(doc: Any, rows: int) -> list[Prediction]:
    """Check and convert a row-format `{"predictions": [...]}` answer."""
    out: list[Prediction] = []
    for row in parse_rows(doc, rows):
        if not set(OUTPUTS) - set(STOP_OUTPUTS) <= set(row):  # older exports: no stop_index
            raise UpstreamBadResponse("prediction row lacks signature outputs")
        try:
            out.append(
                Prediction(
                    text=decode_text(row["text"]),
                    prompt_tokens=int(row["prompt_tokens"]),
                    output_tokens=int(row["output_tokens"]),
                    finish_reason=decode_text(row["finish_reason"]),
                    mean_nll=float(row["mean_nll"]),
                    truncated_prompt_tokens=int(row["truncated_prompt_tokens"]),
                )
            )
        except (TypeError, ValueError) as exc:
            raise UpstreamBadResponse("prediction row has wrong types") from exc
    return out


@dataclass(frozen=True)
class Chunk:
    """One row of the `continue` outputs: the next bytes of a generation."""

    tokens: bytes  # the chunk's bytes (may split a UTF-8 character)
    finish_reason: str  # FINISH_NONE while the row may go on
    nll_sum: float
    n_scored: int
    prompt_tokens: int
    truncated_prompt_tokens: int
    ended: bool = False  # the model's end token ended the row (scored, not an output token)
    ids: tuple[int, ...] = ()  # the chunk's token ids (`token_ids`), for the next call

    @property
    def output_tokens(self) -> int:
        """The model's tokens in this chunk: what it scored but its end token (a byte model's
        tokens are its bytes; a subword model's are fewer)."""
        return self.n_scored - int(self.ended)


def parse_chunks(doc: Any, rows: int) -> list[Chunk]:
    """Check and convert a row-format `continue` answer."""
    out: list[Chunk] = []
    for row in parse_rows(doc, rows):
        if not set(CONTINUE_OUTPUTS) - set(STOP_OUTPUTS) - set(RESUME_OUTPUTS) <= set(row):
            raise UpstreamBadResponse("continue row lacks signature outputs")
        try:
            n = int(row["n_tokens"])
            tokens = row["tokens"]
            if not isinstance(tokens, list) or not 0 <= n <= len(tokens):
                raise ValueError("tokens")
            out.append(
                Chunk(
                    tokens=bytes(int(t) for t in tokens[:n]),
                    finish_reason=decode_text(row["finish_reason"]),
                    nll_sum=float(row["nll_sum"]),
                    n_scored=int(row["n_scored"]),
                    prompt_tokens=int(row["prompt_tokens"]),
                    truncated_prompt_tokens=int(row["truncated_prompt_tokens"]),
                    ended=decode_text(row["finish_reason"]) == FINISH_STOP
                    and int(row.get("stop_index", NO_STOP)) == NO_STOP,
                    ids=parse_ids(decode_text(row.get("token_ids", ""))),
                )
            )
        except (TypeError, ValueError) as exc:
            raise UpstreamBadResponse("continue row has wrong types") from exc
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
            connector=connector, skip_auto_headers=("User-Agent",)
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
        if status != 200:
            raise UpstreamHTTPError(status, error_message(raw) or f"upstream answered {status}")
        try:
            return orjson.loads(raw)
        except ValueError as exc:  # orjson.JSONDecodeError is a ValueError
            raise UpstreamBadResponse(f"upstream answered {status} with non-json") from exc

    async def predict(
        self, model: str, version: int, rows: list[dict[str, Any]], timeout_s: float
    ) -> tuple[list[Prediction], float]:
        """Run rows on one version; returns predictions and upstream seconds."""
        url = self.base_url + predict_path(model, version)
        body = orjson.dumps(row_request(rows, SIGNATURE_NAME))
        start = time.perf_counter()
        doc = await self._call("POST", url, timeout_s, body)
        return parse_predictions(doc, len(rows)), time.perf_counter() - start

    async def continue_(
        self, model: str, version: int, rows: list[dict[str, Any]], timeout_s: float
    ) -> tuple[list[Chunk], float]:
        """Run `continue` rows on one version; returns the chunks and upstream seconds."""
        url = self.base_url + predict_path(model, version)
        body = orjson.dumps(row_request(rows, CONTINUE_SIGNATURE_NAME))
        start = time.perf_counter()
        doc = await self._call("POST", url, timeout_s, body)
        return parse_chunks(doc, len(rows)), time.perf_counter() - start

    async def signatures(self, model: str, version: int, timeout_s: float) -> dict[str, set[str]]:
        """A version's signatures and their input names, from TF Serving's metadata."""
        url = self.base_url + status_path(model, version) + "/metadata"
        doc = await self._call("GET", url, timeout_s, None)
        try:
            defs = doc["metadata"]["signature_def"]["signature_def"]
            return {name: set(sig.get("inputs", {})) for name, sig in defs.items()}
        except (KeyError, TypeError, AttributeError) as exc:
            raise UpstreamBadResponse("model metadata without signature_def") from exc

    async def available_versions(self, model: str, timeout_s: float = 2.0) -> list[int]:
        """Versions of `model` in state AVAILABLE ([] when it has none)."""
        url = self.base_url + status_path(model)
        try:
            doc = await self._call("GET", url, timeout_s, None)
        except UpstreamHTTPError as exc:
            if exc.status == 404:
                return []
            raise
        return available_versions(parse_model_status(doc))


async def cancel_quietly(task: asyncio.Task[Any] | None) -> None:
    """Cancel a background task and wait for it."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down either way
        pass
