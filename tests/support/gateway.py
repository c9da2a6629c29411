"""The gateway launcher for tests (stack.launch), plus a keys-file helper.

with running_gateway(upstream_url, keys_file, canary_weight=0.1) as gw:
    httpx.post(f"{gw.url}/v1/generate", headers={"Authorization": f"Bearer {key}"}, ...)
"""

from __future__ import annotations

from pathlib import Path

from serving.gateway.keys import add_key
from stack.launch import GatewayProcess, GatewayStartError, running_gateway
from tokenpulse.procs import free_port

__all__ = [
    "GatewayProcess",
    "GatewayStartError",
    "free_port",
    "make_keys_file",
    "running_gateway",
]


def make_keys_file(path: Path, **keys: dict[str, object]) -> dict[str, str]:
    """Write a keys file with one key per keyword (its value: add_key options); return id → key."""
    return {key_id: add_key(path, key_id, **opts) for key_id, opts in keys.items()}  # type: ignore[arg-type]
