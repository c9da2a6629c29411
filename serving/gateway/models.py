"""`GET /v1/models`: the served models as OpenAI lists them, with their versions and labels.

`openai` SDK's `models.list()` reads `id`, `object`, `created` and `owned_by`; `max_model_len`
is the context window, as vLLM lists it. The versions the model server has AVAILABLE, the
version labels the router resolves, and what the versions can do (read from each version's
signatures in TF Serving's metadata) are in the extra `tokenpulse` object (the SDK keeps both in
`model_extra`). A key sees the models it may use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from aiohttp import web
from pydantic import BaseModel, Field

from serving.gateway.caps import VersionCaps
from serving.gateway.errors import openai_body
from serving.gateway.handler import Call, Handler, json_response, request_id
from serving.gateway.keys import ApiKey
from serving.gateway.routing import Router

OWNER = "tokenpulse"


class ModelVersions(BaseModel):
    """What the gateway routes to: AVAILABLE versions (newest first) and label -> version, and
    what they can do (null until every AVAILABLE version's signatures were read)."""

    versions: list[str]
    labels: dict[str, str]
    streams: bool | None = Field(
        description="Every AVAILABLE version exports `continue`: `stream: true` works."
    )
    stop_in_graph: bool | None = Field(
        description="The model stops decoding at `stop` itself; false: it decodes to max_tokens "
        "(or its end of text) and the gateway trims the text at the stop sequence."
    )


class ModelCard(BaseModel):
    """One served model."""

    id: str
    object: Literal["model"] = "model"
    created: int = 0  # the model server does not say when a model appeared
    owned_by: str = OWNER
    max_model_len: int = Field(description="Context window: prompt + completion tokens.")
    tokenpulse: ModelVersions


def _all(caps: list[VersionCaps | None], name: str) -> bool | None:
    if not caps or any(c is None for c in caps):
        return None
    return all(getattr(c, name) for c in caps)


class ModelList(BaseModel):
    """OpenAI's model list."""

    object: Literal["list"] = "list"
    data: list[ModelCard]


def listing(
    router: Router,
    key: ApiKey,
    window: int,
    caps: dict[tuple[str, int], VersionCaps] | None = None,
) -> ModelList:
    """The models `key` may use, with versions, labels and what they can do, as known now."""
    caps = caps or {}
    cards = []
    for name, state in router.models.items():
        if not key.allows(name):
            continue
        known = [caps.get((name, v)) for v in state.available]
        cards.append(
            ModelCard(
                id=name,
                max_model_len=window,
                tokenpulse=ModelVersions(
                    versions=[str(v) for v in state.available],
                    labels={label: str(v) for label, v in sorted(state.labels.items())},
                    streams=_all(known, "streams"),
                    stop_in_graph=_all(known, "stop_in_graph"),
                ),
            )
        )
    return ModelList(data=cards)


@dataclass
class ModelsEndpoint:
    """`GET /v1/models` on the shared handler."""

    handler: Handler
    router: Router
    window: int  # the context window every card states
    caps: dict[tuple[str, int], VersionCaps]  # filled in place by the status poll

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """The models this key may use, with versions and labels."""
        call = Call(request, "models", request_id(request))
        return await self.handler.answer(call, openai_body, self._list)

    async def _list(self, call: Call) -> web.Response:
        key = self.handler.authenticate(call)
        body = listing(self.router, key, self.window, self.caps)
        return json_response(body, headers=self.handler.headers(call))
