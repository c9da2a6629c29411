"""Fuzz the published OpenAPI document: no generated input may get a 5xx (real model behind)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from tests.serving.gateway.helpers import auth
from tests.support.gateway import GatewayProcess, make_keys_file, running_gateway
from tests.support.modelserver import running_modelserver

pytestmark = pytest.mark.slow
MAX_EXAMPLES = 100  # per operation and mode: bounded so the directory stays quick on 2 cores


@pytest.fixture(scope="module")
def fuzzed(
    tmp_path_factory: pytest.TempPathFactory, tiny_export: Path
) -> Iterator[tuple[GatewayProcess, str]]:
    from tests.support.models import install_version

    tmp = tmp_path_factory.mktemp("fuzz")
    install_version(tiny_export, tmp / "gen", 1)
    key = make_keys_file(tmp / "keys.json", demo={})["demo"]
    with (
        running_modelserver(tmp / "gen") as server,
        running_gateway(
            server.rest_url,
            tmp / "keys.json",
            max_new_tokens_limit=4,
            default_max_new_tokens=4,
            max_prompt_chars=256,
            access_log=False,
        ) as gw,
    ):
        yield gw, key


@pytest.mark.parametrize("path", ["/v1/generate", "/v1/completions"])
@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_no_server_errors(fuzzed: tuple[GatewayProcess, str], path: str, mode: str) -> None:
    gw, key = fuzzed
    schema = schemathesis.openapi.from_url(f"{gw.url}/openapi.json")
    operation = schema["/" + path.lstrip("/")]["POST"]
    statuses: list[int] = []

    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(case=operation.as_strategy(schemathesis.GenerationMode(mode)))
    def run(case: schemathesis.Case) -> None:
        response = case.call(base_url=gw.url, headers=auth(key), timeout=30)
        statuses.append(response.status_code)
        case.validate_response(response, checks=[not_a_server_error])

    run()
    assert statuses and max(statuses) < 500
    if mode == "positive":
        assert statuses.count(200) > len(statuses) // 2  # valid input mostly reached the model
    else:
        assert statuses.count(200) < len(statuses) // 2  # invalid input mostly refused
