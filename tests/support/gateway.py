"""The gateway launcher for tests (stack.launch), plus a keys-file helper.

with running_gateway(upstream_url, keys_file, canary_weight=0.1) as gw:
    httpx.post(f"{gw.url}/v1/generate", headers={"Authorization": f"Bearer {key}"}, ...)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serving.gateway.keys import add_key
from stack.launch import (
    GatewayProcess,
    GatewayStartError,
    ModelServerProcess,
    running_gateway,
    running_modelserver,
)
from tests.support.models import install_version
from tokenpulse.procs import free_port

__all__ = [
    "GatewayProcess",
    "GatewayStartError",
    "TinyGen",
    "free_port",
    "make_keys_file",
    "running_gateway",
    "stable_behind_gateway",
]


@dataclass(frozen=True)
class TinyGen:
    """The gateway end-to-end modules' shared model server (tests/serving/gateway/conftest.py's
    `tiny_gen`) and the models.config it serves."""

    server: ModelServerProcess
    config: Path


def make_keys_file(path: Path, **keys: dict[str, object]) -> dict[str, str]:
    """Write a keys file with one key per keyword (its value: add_key options); return id → key."""
    return {key_id: add_key(path, key_id, **opts) for key_id, opts in keys.items()}  # type: ignore[arg-type]


@contextlib.contextmanager
def stable_behind_gateway(
    export: Path, tmp: Path, **options: Any
) -> Iterator[tuple[ModelServerProcess, GatewayProcess, str]]:
    """`export` as version 1 (label stable) of model `gen` in a model server, a gateway with
    `options` (GatewaySettings fields) in front: (server, gateway, a demo key)."""
    base = tmp / "gen"
    install_version(export, base, 1)
    config = tmp / "models.config"
    config.write_text(
        f"model_config_list {{ config {{ name: 'gen' base_path: '{base}'\n"
        "  model_platform: 'tensorflow' version_labels { key: 'stable' value: 1 }\n} }\n"
    )
    key = make_keys_file(tmp / "keys.json", demo={})["demo"]
    with (
        running_modelserver(config_file=config) as server,
        running_gateway(
            server.rest_url, tmp / "keys.json", model_config_file=str(config), **options
        ) as gw,
    ):
        yield server, gw, key
