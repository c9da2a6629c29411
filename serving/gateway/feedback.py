"""`POST /v1/feedback`: a client scores a response it got, by the id it saw (`chatcmpl-…`,
`cmpl-…`, `gen-…`).

The gateway remembers each response it answered (model, version, label and key) for
`feedback_window_s`, at most `feedback_max_responses` of them, oldest forgotten first. Feedback
on a remembered response is counted under its model and version, and only the key that got the
response may give it: another key gets 404 (it learns no more than that the id is taken).
Feedback on a response the gateway no longer remembers (older, or from before a restart) cannot
be checked: it is accepted as `matched: false`, counted under model `__unknown__`, and stored
with the key id that gave it, so an analyst sees whose it is.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from serving.gateway.errors import BadRequest, NotFound, native_body
from serving.gateway.handler import Call, Handler, json_response, request_id
from serving.gateway.jobs import validate_body
from serving.gateway.metrics import GatewayMetrics
from serving.gateway.sink import SampleDispatcher
from tokenpulse.samples import FEEDBACK_CLASSES, Feedback

RESPONSE_PREFIXES = ("chatcmpl-", "cmpl-", "gen-")
# a response id is a prefix and the gateway's request id (serving.gateway.handler._REQUEST_ID)
RESPONSE_ID_PATTERN = r"^(chatcmpl|cmpl|gen)-[A-Za-z0-9._:-]{1,64}$"
THUMBS = (-1.0, 0.0, 1.0)


class FeedbackRequest(BaseModel):
    """Feedback on one response."""

    model_config = ConfigDict(strict=True, extra="forbid")

    response_id: str = Field(
        pattern=RESPONSE_ID_PATTERN,
        description="The response's `id` (chatcmpl-..., cmpl-..., gen-...).",
    )
    score: float = Field(
        ge=-1.0, le=1.0, allow_inf_nan=False,
        description="thumbs: -1 (bad), 0 (neutral) or 1 (good); unit: 0 (bad) to 1 (good).",
    )  # fmt: skip
    scale: Literal["thumbs", "unit"] = Field("thumbs", description="How to read `score`.")
    comment: str | None = Field(
        None, description="Free text (redacted before it is stored; length limited)."
    )


class FeedbackResponse(BaseModel):
    """Feedback accepted (stored asynchronously with the response's sample)."""

    response_id: str
    score_class: Literal["negative", "neutral", "positive"]
    matched: bool = Field(
        description="The gateway still remembered the response: its key was checked and the "
        "feedback is counted under its model and version."
    )


def parse(raw: bytes, max_comment_chars: int) -> FeedbackRequest:
    """Validate a feedback body; every error is a 400 naming the field."""
    req: FeedbackRequest = validate_body(FeedbackRequest, raw, BadRequest)
    if req.scale == "thumbs" and req.score not in THUMBS:
        raise BadRequest("score: on the thumbs scale use -1, 0 or 1", param="score")
    if req.scale == "unit" and req.score < 0:
        raise BadRequest("score: on the unit scale use 0 to 1", param="score")
    if req.comment is not None and len(req.comment) > max_comment_chars:
        raise BadRequest(
            f"comment: at most {max_comment_chars} characters (got {len(req.comment)})",
            param="comment",
        )
    return req


def request_id_of(response_id: str) -> str:
    """The request id inside a response id."""
    for prefix in RESPONSE_PREFIXES:
        if response_id.startswith(prefix):
            return response_id[len(prefix) :]
    return response_id


@dataclass(frozen=True, slots=True)
class Served:
    """What the gateway remembers of one response."""

    model: str
    version: str
    version_label: str
    key_id: str
    expires: float  # monotonic seconds


class RecentResponses:
    """Responses answered in the last `window_s` seconds, at most `max_entries`; one thread."""

    def __init__(
        self, window_s: float, max_entries: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.window_s = window_s
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, Served] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def remember(
        self, request_id: str, model: str, version: str, version_label: str, key_id: str
    ) -> None:
        """Remember a response (a request id answered again is remembered as its latest)."""
        if self.window_s <= 0 or self.max_entries <= 0 or not key_id:
            return
        now = self._clock()
        entries = self._entries
        entries.pop(request_id, None)
        entries[request_id] = Served(model, version, version_label, key_id, now + self.window_s)
        while entries and (
            len(entries) > self.max_entries or next(iter(entries.values())).expires <= now
        ):
            entries.popitem(last=False)

    def get(self, request_id: str) -> Served | None:
        """The response, while remembered."""
        served = self._entries.get(request_id)
        if served is None or served.expires <= self._clock():
            return None
        return served


def accept(
    req: FeedbackRequest, key_id: str, recent: RecentResponses, arrival: float
) -> tuple[Feedback, bool]:
    """The feedback to store, and whether its response was remembered; 404 for another key's."""
    request_id = request_id_of(req.response_id)
    served = recent.get(request_id)
    if served is not None and served.key_id != key_id:
        raise NotFound(f"no response {req.response_id} for this key", param="response_id")
    feedback = Feedback(
        request_id=request_id,
        response_id=req.response_id,
        key_id=key_id,
        score=req.score,
        scale=req.scale,
        comment=req.comment or "",
        timestamp=arrival,
        model=served.model if served else "",
        version=served.version if served else "",
        version_label=served.version_label if served else "",
    )
    assert feedback.score_class in FEEDBACK_CLASSES
    return feedback, served is not None


@dataclass
class FeedbackEndpoint:
    """`POST /v1/feedback` on the shared handler: spends the key's request budget too."""

    handler: Handler
    recent: RecentResponses
    metrics: GatewayMetrics
    samples: SampleDispatcher
    max_comment_chars: int

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Accept a score (202), in the native error shape otherwise."""
        call = Call(request, "feedback", request_id(request))
        return await self.handler.answer(call, native_body, self._accept)

    async def _accept(self, call: Call) -> web.Response:
        key = self.handler.authenticate(call)
        self.handler.pipeline.take_request(key)  # a key cannot write samples without limit
        req = parse(await self.handler.read(call.request), self.max_comment_chars)
        fb, matched = accept(req, key.id, self.recent, call.arrival)
        self.metrics.observe_feedback(fb.model, fb.version, fb.score_class)
        self.samples.offer(fb)
        body = FeedbackResponse(
            response_id=fb.response_id,
            score_class=fb.score_class,  # type: ignore[arg-type]
            matched=matched,
        )
        return json_response(body, 202, self.handler.headers(call))
