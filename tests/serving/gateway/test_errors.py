"""The typed errors as the OpenAPI document declares them: every server error (5xx) the gateway
can answer is listed under its status on each generation endpoint, naming its code."""

from __future__ import annotations

from pathlib import Path

import pytest

from serving.gateway.errors import GatewayError
from serving.gateway.openapi import build_openapi
from serving.gateway.settings import GatewaySettings

GENERATION = ("/v1/generate", "/v1/completions", "/v1/chat/completions")


def _subclasses(cls: type[GatewayError]) -> list[type[GatewayError]]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]


@pytest.mark.parametrize("path", GENERATION)
def test_every_server_error_is_declared_under_its_status_with_its_code(
    tmp_path: Path, path: str
) -> None:
    (tmp_path / "keys.json").write_text('{"keys": []}')
    doc = build_openapi(GatewaySettings(keys_file=tmp_path / "keys.json"))
    responses = doc["paths"][path]["post"]["responses"]
    server_errors = {(c.status, c.code) for c in _subclasses(GatewayError) if c.status >= 500}
    # an upstream refusal of a validated request is the server's fault, answered 502
    assert (502, "upstream_rejected") in server_errors
    for status, code in sorted(server_errors):
        assert str(status) in responses, (path, status)
        assert f"`{code}`" in responses[str(status)]["description"], (path, status, code)
