"""`GET /v1/models`: the served models as OpenAI lists them, with their versions and labels.

`openai` SDK's `models.list()` reads `id`, `object`, `created` and `owned_by`; the versions the
model server has AVAILABLE and the version labels the router resolves are in the extra
`tokenpulse` object (the SDK keeps it in `model_extra`). A key sees the models it may use.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from serving.gateway.keys import ApiKey
from serving.gateway.routing import Router

OWNER = "tokenpulse"


class ModelVersions(BaseModel):
    """What the gateway routes to: AVAILABLE versions (newest first) and label -> version."""

    versions: list[str]
    labels: dict[str, str]


class ModelCard(BaseModel):
    """One served model."""

    id: str
    object: Literal["model"] = "model"
    created: int = 0  # the model server does not say when a model appeared
    owned_by: str = OWNER
    tokenpulse: ModelVersions


class ModelList(BaseModel):
    """OpenAI's model list."""

    object: Literal["list"] = "list"
    data: list[ModelCard]


def listing(router: Router, key: ApiKey) -> ModelList:
    """The models `key` may use, with versions and labels as the router knows them now."""
    return ModelList(
        data=[
            ModelCard(
                id=name,
                tokenpulse=ModelVersions(
                    versions=[str(v) for v in state.available],
                    labels={label: str(v) for label, v in sorted(state.labels.items())},
                ),
            )
            for name, state in router.models.items()
            if key.allows(name)
        ]
    )
