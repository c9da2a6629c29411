"""Fuzz the published OpenAPI document (real model behind): no generated input may get a 5xx,
and every answer, success or error, must match the status, content type, headers and schema
that the document declares for it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.serving.gateway.helpers import auth
from tests.support.gateway import GatewayProcess, TinyGen, make_keys_file, running_gateway

pytestmark = pytest.mark.slow
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
MAX_EXAMPLES = 100  # per operation and mode: bounded so the directory stays quick on 2 cores


def _call(case: schemathesis.Case, base_url: str, headers: dict[str, str]) -> httpx.Response:
    """Send a case with httpx: `case.call` goes through requests, whose urllib3 is replaced in
    this environment by urllib3-future (a dependency of grafana-client), which it cannot use."""
    kwargs = case.as_transport_kwargs(base_url=base_url, headers=headers)
    kwargs.pop("cookies", None)
    if "data" in kwargs:
        kwargs["content"] = kwargs.pop("data")
    return httpx.request(timeout=30, **kwargs)


@pytest.fixture(scope="module")
def fuzzed(
    tmp_path_factory: pytest.TempPathFactory, tiny_gen: TinyGen
) -> Iterator[tuple[GatewayProcess, str]]:
    tmp = tmp_path_factory.mktemp("fuzz")
    key = make_keys_file(tmp / "keys.json", demo={})["demo"]
    with running_gateway(
        tiny_gen.server.rest_url,
        tmp / "keys.json",
        max_new_tokens_limit=4,
        default_max_new_tokens=4,
        max_prompt_chars=256,
        context_window_tokens=128,  # the tiny preset's window
        access_log=False,
    ) as gw:
        yield gw, key


@pytest.mark.parametrize("path", ["/v1/generate", "/v1/completions", "/v1/chat/completions"])
@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_no_server_errors(fuzzed: tuple[GatewayProcess, str], path: str, mode: str) -> None:
    gw, key = fuzzed
    schema = schemathesis.openapi.from_url(f"{gw.url}/openapi.json")
    operation = schema["/" + path.lstrip("/")]["POST"]
    statuses: list[int] = []
    too_long = 0  # schema-valid, but prompt and completion do not fit the window together

    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(case=operation.as_strategy(schemathesis.GenerationMode(mode)))
    def run(case: schemathesis.Case) -> None:
        nonlocal too_long
        response = _call(case, gw.url, auth(key))
        statuses.append(response.status_code)
        case.validate_response(response, checks=CHECKS)
        if response.status_code == 400 and "context_length_exceeded" in response.text:
            too_long += 1

    run()
    assert statuses and max(statuses) < 500
    if mode == "positive":
        # valid input mostly reached the model; a JSON schema cannot say that the messages
        # together must fit the window (128 tokens here), so chat may also meet that 400
        assert statuses.count(200) + too_long > len(statuses) // 2
        assert statuses.count(200) > len(statuses) // 4
    else:
        assert statuses.count(200) < len(statuses) // 2  # invalid input mostly refused


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_match_the_document(fuzzed: tuple[GatewayProcess, str], path: str) -> None:
    gw, _ = fuzzed
    schema = schemathesis.openapi.from_url(f"{gw.url}/openapi.json")
    case = schema[path]["GET"].Case()
    case.validate_response(_call(case, gw.url, {}), checks=CHECKS)


def test_errors_outside_the_generated_space_match_the_document(
    fuzzed: tuple[GatewayProcess, str],
) -> None:
    gw, key = fuzzed
    schema = schemathesis.openapi.from_url(f"{gw.url}/openapi.json")
    for path, body in (
        ("/v1/generate", {"prompt": "hi"}),
        ("/v1/completions", {"model": "gen", "prompt": "hi"}),
        ("/v1/chat/completions", {"model": "gen", "messages": [{"role": "user", "content": "hi"}]}),
    ):
        operation = schema[path]["POST"]
        for headers in ({}, auth("tp-unknown"), {**auth(key), "X-Request-Timeout": "0.5"}):
            case = operation.Case(body=body, headers=headers, media_type="application/json")
            response = _call(case, gw.url, {})
            assert response.status_code in (400, 401)
            case.validate_response(response, checks=CHECKS)
