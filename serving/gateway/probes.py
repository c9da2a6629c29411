"""The bodies of `/healthz` and `/readyz`, as `/openapi.json` declares them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class Health(BaseModel):
    """The process is up."""

    status: Literal["ok"] = "ok"


class ModelReadiness(BaseModel):
    """One served model: its AVAILABLE versions and its version labels."""

    available_versions: list[str]
    labels: dict[str, int]


class Readiness(BaseModel):
    """Ready when the upstream answered and every model has an AVAILABLE version."""

    status: Literal["ready", "not_ready"]
    upstream_reachable: bool
    models: dict[str, ModelReadiness]
    circuit_breaker: Literal["closed", "half_open", "open"]
