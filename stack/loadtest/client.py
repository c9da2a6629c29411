"""One request and its outcome, for each route: the gateway's native and OpenAI routes, and
TF Serving's REST predict (the model server or the seed's naive server, without a gateway).

The streaming route (`--route openai --interaction stream`: `/v1/completions` with
`stream: true`) reads the
server-sent events as they arrive and fills `ttft_s` (first chunk with text) and `itl_s` (mean
gap between text chunks); unary routes leave them None (reported as n/a).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import aiohttp

from stack.loadtest.workload import Item
from tokenpulse.tfserving.predict import predict_path, row_request
from tokenpulse.tfserving.signature import default_row

RouteName = Literal["native", "openai", "tfserving"]
OK = "ok"
# gateway error codes that are load shedding rather than failure
SHED_CODES = frozenset({"rate_limit_exceeded", "overloaded"})


@dataclass
class Outcome:
    """What happened to one request; times are time.monotonic() seconds."""

    intended: float  # when the schedule said to send (open loop) or the slot freed (closed)
    sent: float
    done: float
    status: int  # HTTP status; 0 when no response came (timeout, connection error)
    label: str  # OK, or e.g. "429 rate_limit_exceeded", "503 overloaded", "timeout"
    prompt_tokens: int = 0
    output_tokens: int = 0
    server_s: float | None = None  # the server's own account (gateway `timings.total_s`)
    ttft_s: float | None = None  # time to first token: streaming only
    itl_s: float | None = None  # mean inter-token latency: streaming only
    key_index: int = 0

    @property
    def latency_s(self) -> float:
        """From the intended send time to the end of the response."""
        return self.done - self.intended

    @property
    def ok(self) -> bool:
        """Answered 2xx with a readable body."""
        return self.label == OK

    @property
    def shed(self) -> bool:
        """Refused by load shedding or a rate limit (429, 503 overloaded)."""
        return self.status == 429 or self.label.split(" ")[-1] in SHED_CODES


class Route:
    """How one API is asked and read."""

    name: ClassVar[str] = ""
    streaming: ClassVar[bool] = False

    def __init__(self, model: str, truncate_prompt_tokens: int | None = None) -> None:
        self.model = model
        self.truncate = truncate_prompt_tokens

    def path(self) -> str:
        """The request path."""
        raise NotImplementedError

    def body(self, item: Item) -> dict[str, Any]:
        """The JSON body."""
        raise NotImplementedError

    def read(self, doc: Any) -> tuple[int, int, float | None]:
        """(prompt tokens, output tokens, server seconds) from a 2xx body; KeyError/TypeError
        when it is not one."""
        raise NotImplementedError


def _sampling(item: Item) -> dict[str, Any]:
    """The item's seed and temperature, where it sets them."""
    pairs = (("seed", item.seed), ("temperature", item.temperature))
    return {k: v for k, v in pairs if v is not None}


class NativeRoute(Route):
    """`POST /v1/generate`."""

    name = "native"

    def path(self) -> str:
        return "/v1/generate"

    def body(self, item: Item) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "prompt": item.prompt,
            "max_new_tokens": item.max_new_tokens,
            "model": self.model,
            **_sampling(item),
        }
        if self.truncate is not None:
            doc["truncate_prompt_tokens"] = self.truncate
        return doc

    def read(self, doc: Any) -> tuple[int, int, float | None]:
        usage = doc["usage"]
        return int(usage["prompt_tokens"]), int(usage["output_tokens"]), doc["timings"]["total_s"]


class OpenAIRoute(Route):
    """`POST /v1/completions` (OpenAI-compatible)."""

    name = "openai"

    def path(self) -> str:
        return "/v1/completions"

    def body(self, item: Item) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "model": self.model,
            "prompt": item.prompt,
            "max_tokens": item.max_new_tokens,
            **_sampling(item),
        }
        if self.truncate is not None:
            doc["truncate_prompt_tokens"] = self.truncate
        return doc

    def read(self, doc: Any) -> tuple[int, int, float | None]:
        usage = doc["usage"]
        extra = doc.get("tokenpulse") or {}
        server = (extra.get("timings") or {}).get("total_s")
        return int(usage["prompt_tokens"]), int(usage["completion_tokens"]), server


class OpenAIStreamRoute(OpenAIRoute):
    """`POST /v1/completions` with `stream: true`: server-sent `text_completion` chunks, the
    usage in the last one (`stream_options.include_usage`), then `data: [DONE]`."""

    name = "openai"
    streaming = True

    def body(self, item: Item) -> dict[str, Any]:
        return {**super().body(item), "stream": True, "stream_options": {"include_usage": True}}


class NativeStreamRoute(NativeRoute):
    """`POST /v1/generate` with `stream: true`: the gateway's own chunks, the usage in the last."""

    streaming = True

    def body(self, item: Item) -> dict[str, Any]:
        return {**super().body(item), "stream": True}


class SseError(ValueError):
    """A stream that ended with an error event, or without `[DONE]`."""


class StreamReader:
    """Follows one SSE body: the times text arrived, the usage, and how it ended."""

    def __init__(self) -> None:
        self.text_times: list[float] = []
        self.usage: dict[str, Any] | None = None
        self.done = False
        self.error = ""

    def line(self, raw: bytes, now: float) -> None:
        """One line of the body (events are single `data:` lines)."""
        line = raw.strip()
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return
        doc = json.loads(data)
        if "error" in doc:
            err = doc["error"] or {}
            self.error = str(err.get("code") or err.get("type") or "error")
            return
        if doc.get("text") or any(c.get("text") for c in doc.get("choices") or ()):
            self.text_times.append(now)  # native chunks carry `text`, OpenAI's `choices`
        if doc.get("usage"):
            self.usage = doc["usage"]

    def finish(self, out: Outcome) -> None:
        """Fill the outcome's tokens, TTFT and ITL; SseError when the stream did not end well."""
        if self.error:
            raise SseError(self.error)
        if not self.done or self.usage is None:
            raise SseError("unfinished")
        out.prompt_tokens = int(self.usage["prompt_tokens"])
        usage = self.usage
        out.output_tokens = int(usage.get("completion_tokens", usage.get("output_tokens", 0)))
        if self.text_times:
            out.ttft_s = self.text_times[0] - out.sent
            gaps = len(self.text_times) - 1
            if gaps:
                out.itl_s = (self.text_times[-1] - self.text_times[0]) / gaps


class TfServingRoute(Route):
    """TF Serving's `POST /v1/models/{model}:predict`, one row."""

    name = "tfserving"

    def __init__(
        self, model: str, truncate_prompt_tokens: int | None = None, version: int | None = None
    ) -> None:
        super().__init__(model, truncate_prompt_tokens)
        self.version = version

    def path(self) -> str:
        return predict_path(self.model, self.version)

    def body(self, item: Item) -> dict[str, Any]:
        return row_request([default_row(item.prompt, item.max_new_tokens) | _sampling(item)])

    def read(self, doc: Any) -> tuple[int, int, float | None]:
        (row,) = doc["predictions"]
        return int(row["prompt_tokens"]), int(row["output_tokens"]), None


ROUTES: dict[str, type[Route]] = {r.name: r for r in (NativeRoute, OpenAIRoute, TfServingRoute)}
STREAM_ROUTES: dict[str, type[Route]] = {OpenAIStreamRoute.name: OpenAIStreamRoute}


def make_route(name: str, interaction: str, model: str, truncate: int | None) -> Route:
    """The route for `--route` and `--interaction` (settings validated the pair)."""
    table = STREAM_ROUTES if interaction == "stream" else ROUTES
    return table[name](model, truncate)


def _error_code(raw: bytes) -> str:
    """The gateway's `error.code`, when the body has one."""
    try:
        err = json.loads(raw).get("error")
        return str(err.get("code") or "") if isinstance(err, dict) else ""
    except (ValueError, AttributeError):
        return ""


class Client:
    """An aiohttp session without a connection limit (a pool limit would queue requests inside
    the client, hiding load from the server); `async with Client(...) as c: await c.send(...)`."""

    def __init__(
        self, base_url: str, route: Route, keys: list[str], timeout_s: float = 30.0
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.route = route
        self.keys = keys
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Client:
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(connector=connector, timeout=self.timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        """The open session (for a sender that asks in several calls)."""
        assert self._session is not None, "use `async with Client(...)`"
        return self._session

    def _headers(self, key_index: int) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.keys:
            headers["Authorization"] = f"Bearer {self.keys[key_index % len(self.keys)]}"
        return headers

    async def send(self, item: Item, intended: float) -> Outcome:
        """Send one request now; never raises for what the server or the network does."""
        assert self._session is not None, "use `async with Client(...)`"
        body = json.dumps(self.route.body(item), ensure_ascii=False).encode()
        sent = time.monotonic()
        status, label, raw = 0, OK, b""
        stream: StreamReader | None = None
        try:
            async with self._session.post(
                self.base_url + self.route.path(), data=body, headers=self._headers(item.key_index)
            ) as resp:
                status = resp.status
                if self.route.streaming and 200 <= status < 300:
                    stream = StreamReader()
                    async for line in resp.content:
                        stream.line(line, time.monotonic())
                else:
                    raw = await resp.read()
        except TimeoutError:
            label = "timeout"
        except (aiohttp.ClientError, OSError) as exc:
            label = "connect" if isinstance(exc, aiohttp.ClientConnectorError) else "transport"
        done = time.monotonic()
        out = Outcome(intended, sent, done, status, label, key_index=item.key_index)
        if status == 0:
            return out
        if not 200 <= status < 300:
            out.label = f"{status} {_error_code(raw)}".strip()
            return out
        try:
            if stream is not None:
                stream.finish(out)
            else:
                out.prompt_tokens, out.output_tokens, out.server_s = self.route.read(
                    json.loads(raw)
                )
        except SseError as exc:
            out.label = f"{status} stream {exc}"
        except (ValueError, KeyError, TypeError):
            out.label = f"{status} unreadable"
        return out
