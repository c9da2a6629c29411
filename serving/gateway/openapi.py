"""The OpenAPI 3.1 document, built from the same pydantic models that validate requests and
build every response body, so the document and the answers cannot drift apart."""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from serving.gateway.chat import (
    CHAT_TEMPLATE,
    NAME_PATTERN,
    ChatCompletion,
    ChatCompletionChunk,
    ChatRequest,
)
from serving.gateway.completions import CompletionChunk, CompletionRequest, CompletionResponse
from serving.gateway.errors import NativeError, OpenAIError
from serving.gateway.feedback import FeedbackRequest, FeedbackResponse
from serving.gateway.fields import INERT, MESSAGE_INERT
from serving.gateway.models import ModelList
from serving.gateway.native import GenerateChunk, GenerateRequest, GenerateResponse
from serving.gateway.pipeline import MIN_REQUEST_TIMEOUT_S
from serving.gateway.probes import Health, Readiness
from serving.gateway.settings import GatewaySettings

_ERRORS = {
    "400": "Malformed JSON or invalid UTF-8, an X-Request-Timeout out of range, or (on the "
    "OpenAI routes) a bad parameter, named in `param`: `context_length_exceeded` when prompt "
    "and max_tokens do not fit the model's window (vLLM's words), a field set to a value that "
    "would change the result and is not supported, an unrecognized field, or "
    "`streaming_unsupported` (stream: true, and the routed version has no `continue` "
    "signature).",
    "401": "No API key, or an unknown one.",
    "403": "The key may not use this model.",
    "404": "Unknown model (`model_not_found`) or version label.",
    "413": "Body or prompt over the size limit.",
    "422": "A field with a wrong type or out of range.",
    "429": "Per-key rate limit on requests or tokens; see Retry-After.",
    "502": "`upstream_error`: the model server failed (5xx) or answered what the gateway cannot "
    "read; `upstream_rejected`: it refused a request the gateway had validated (4xx, e.g. "
    "TF Serving's FAILED_PRECONDITION or INVALID_ARGUMENT): the server's fault, not the "
    "request's.",
    "503": "`overloaded` (load shed), `circuit_open`, `upstream_unavailable` (no model "
    "server or version to call, or it is busy), or `shutting_down` (this gateway is draining "
    "before it exits: retry, the connection is closed); see Retry-After.",
    "504": "`deadline_exceeded`: the deadline passed (X-Request-Timeout or the gateway default).",
}
_TIMEOUT_HEADER: dict[str, Any] = {
    "name": "X-Request-Timeout",
    "in": "header",
    "required": False,
    "description": "Deadline in seconds; a value outside the declared range gets 400.",
    "schema": {"type": "number", "minimum": MIN_REQUEST_TIMEOUT_S},
}


def _op(
    summary: str, req: str, resp: str, error: str, max_timeout: float, chunk: str
) -> dict[str, Any]:
    stream = (
        f'With `"stream": true`: server-sent events, each `data: <{chunk}>` as text arrives, '
        "then `data: [DONE]`; a failure after the first event sends `data: <OpenAIError>` "
        "before `[DONE]`."
    )
    responses: dict[str, Any] = {
        "200": {
            "description": f"Generated text. {stream}",
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{resp}"}},
                "text/event-stream": {
                    # one server-sent event: its `data` is a chunk's JSON, or `[DONE]`
                    "schema": {
                        "type": "object",
                        "required": ["data"],
                        "properties": {"data": {"type": "string"}, "event": {"type": "string"}},
                        "description": stream,
                    }
                },
            },
        }
    }
    for code, text in _ERRORS.items():
        responses[code] = {
            "description": text,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{error}"}}},
        }
    responses["401"]["headers"] = {
        "WWW-Authenticate": {"required": True, "schema": {"type": "string", "pattern": "^Bearer"}}
    }
    return {
        "post": {
            "summary": summary,
            "security": [{"bearer": []}],
            "parameters": [
                {**_TIMEOUT_HEADER, "schema": {**_TIMEOUT_HEADER["schema"], "maximum": max_timeout}}
            ],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": {"$ref": f"#/components/schemas/{req}"}}
                },
            },
            "responses": responses,
        }
    }


_FEEDBACK_ERRORS = {
    "400": "Malformed JSON, or a field missing, of a wrong type or out of range (`param` names "
    "it): a response id that is not cmpl-... or gen-..., a score off its scale, a comment too "
    "long.",
    "401": "No API key, or an unknown one.",
    "404": "The response was answered to another key.",
    "413": "Body over the size limit.",
}


def _feedback_op() -> dict[str, Any]:
    """POST /v1/feedback: 202 with the response's score class, errors in the native shape."""

    def ref(name: str) -> dict[str, Any]:
        return {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}

    responses: dict[str, Any] = {
        "202": {"description": "Accepted; stored with the response's sample.",
                "content": ref("FeedbackResponse")},
    }  # fmt: skip
    for code, text in _FEEDBACK_ERRORS.items():
        responses[code] = {"description": text, "content": ref("NativeError")}
    responses["401"]["headers"] = {
        "WWW-Authenticate": {"required": True, "schema": {"type": "string", "pattern": "^Bearer"}}
    }
    return {
        "post": {
            "summary": "Score a response this key got (thumbs -1/0/1, or 0 to 1), with a comment.",
            "security": [{"bearer": []}],
            "requestBody": {"required": True, "content": ref("FeedbackRequest")},
            "responses": responses,
        }
    }


def _models_op() -> dict[str, Any]:
    """GET /v1/models: the models the key may use, with versions and labels."""
    ok = {"application/json": {"schema": {"$ref": "#/components/schemas/ModelList"}}}
    err = {"application/json": {"schema": {"$ref": "#/components/schemas/OpenAIError"}}}
    return {
        "get": {
            "summary": "Served models with their AVAILABLE versions and version labels.",
            "security": [{"bearer": []}],
            "responses": {
                "200": {"description": "The models this key may use.", "content": ok},
                "401": {
                    "description": "No API key, or an unknown one.",
                    "content": err,
                    "headers": {
                        "WWW-Authenticate": {
                            "required": True,
                            "schema": {"type": "string", "pattern": "^Bearer"},
                        }
                    },
                },
            },
        }
    }


def _get(summary: str, schema: str | None, not_ready: bool = False) -> dict[str, Any]:
    content = (
        {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}
        if schema
        else {"text/plain": {"schema": {"type": "string"}}}
    )
    responses = {"200": {"description": "OK", "content": content}}
    if not_ready:
        responses["503"] = {"description": "Not ready", "content": content}
    return {"get": {"summary": summary, "responses": responses}}


def _message_schema(settings: GatewaySettings) -> dict[str, Any]:
    """One chat message as `chat.flatten` takes it; content no longer than can ever fit (the
    deployment's prompt size: how many characters fit the window depends on the model's
    tokens, which a subword model packs several characters into)."""
    longest = settings.max_prompt_chars
    text_part = {
        "type": "object",
        "required": ["type", "text"],
        "properties": {"type": {"const": "text"}, "text": {"type": "string", "maxLength": longest}},
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "required": ["role", "content"],
        "properties": {
            "role": {"enum": ["system", "developer", "user", "assistant"]},
            "content": {
                "anyOf": [
                    {"type": "string", "maxLength": longest},
                    {"type": "array", "items": text_part},
                ]
            },
            "name": {"type": "string", "pattern": NAME_PATTERN},
            **{name: rule.schema() for name, rule in MESSAGE_INERT.items()},
        },
        "additionalProperties": False,
    }


def _apply_limits(schemas: dict[str, Any], settings: GatewaySettings) -> None:
    """Write this deployment's limits into the request schemas, so clients see them."""
    native = schemas["GenerateRequest"]["properties"]
    native["max_new_tokens"]["anyOf"][0]["maximum"] = min(
        settings.max_new_tokens_limit, settings.context_window_tokens - 2
    )
    native["prompt"]["maxLength"] = settings.max_prompt_chars
    native["model"] = {"type": "string", "enum": list(settings.models)}
    openai = schemas["CompletionRequest"]["properties"]
    openai["model"] = {"type": "string", "enum": list(settings.models)}
    openai["prompt"] = {
        "anyOf": [
            {"type": "string", "minLength": 1, "maxLength": settings.max_prompt_chars},
            {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": settings.max_prompt_chars},
                "minItems": 1,
                "maxItems": settings.max_prompts,
            },
        ]
    }
    # prompt tokens (a token and the start token at least) + max_tokens must fit the window
    most = min(settings.max_new_tokens_limit, settings.context_window_tokens - 2)
    openai["max_tokens"]["anyOf"][0]["maximum"] = most
    openai["stop"] = {
        "anyOf": [
            {"type": "string", "minLength": 1},
            {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 4},
            {"type": "null"},
        ]
    }
    options = {
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    "include_usage": {"type": "boolean"},
                    "continuous_usage_stats": {"type": "boolean"},
                    "include_obfuscation": {"const": False},
                },
                "additionalProperties": False,
            },
            {"type": "null"},
        ],
        "description": "Only with stream: include_usage adds a last event with the usage; "
        "continuous_usage_stats (vLLM's) puts the usage so far on every event.",
    }
    openai["stream_options"] = options
    chat = schemas["ChatRequest"]["properties"]
    chat["stream_options"] = options
    chat["model"] = {"type": "string", "enum": list(settings.models)}
    chat["stop"] = openai["stop"]
    for name in ("max_tokens", "max_completion_tokens"):
        chat[name]["anyOf"][0]["maximum"] = most
    # every other field of OpenAI's and vLLM's: accepted only with a value that changes
    # nothing (serving.gateway.fields, the one rule both endpoints apply); any other is refused
    for props in (openai, chat):
        props.update({name: rule.schema() for name, rule in INERT.items()})
    for name in ("CompletionRequest", "ChatRequest"):
        schemas[name]["additionalProperties"] = False
        # stream_options (an object) only with stream: true
        schemas[name]["if"] = {
            "properties": {"stream_options": {"type": "object"}},
            "required": ["stream_options"],
        }
        schemas[name]["then"] = {"properties": {"stream": {"const": True}}, "required": ["stream"]}
    chat["messages"]["items"] = _message_schema(settings)
    # bounds every accepted request meets (the flattened prompt must fit the window, see
    # tokenpulse.chatformat): a token at least per turn, one for "Assistant: " and the start
    # token, whatever the model's vocabulary; none refuses what the code would take
    chat["messages"]["maxItems"] = max(1, settings.context_window_tokens - 2)
    comment = schemas["FeedbackRequest"]["properties"]["comment"]
    comment["anyOf"][0]["maxLength"] = settings.feedback_max_comment_chars


def build_openapi(settings: GatewaySettings) -> dict[str, Any]:
    """The document served at /openapi.json."""
    _, defs = models_json_schema(
        [
            (GenerateRequest, "validation"),
            (GenerateResponse, "serialization"),
            (CompletionRequest, "validation"),
            (CompletionResponse, "serialization"),
            (CompletionChunk, "serialization"),
            (ChatRequest, "validation"),
            (ChatCompletion, "serialization"),
            (ChatCompletionChunk, "serialization"),
            (GenerateChunk, "serialization"),
            (ModelList, "serialization"),
            (NativeError, "serialization"),
            (OpenAIError, "serialization"),
            (FeedbackRequest, "validation"),
            (FeedbackResponse, "serialization"),
            (Health, "serialization"),
            (Readiness, "serialization"),
        ],
        ref_template="#/components/schemas/{model}",
    )
    schemas = dict(defs.get("$defs", {}))
    _apply_limits(schemas, settings)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "TokenPulse gateway",
            "version": "1",
            "description": "Text generation in front of TensorFlow Serving.",
        },
        "servers": [{"url": "/"}],
        "paths": {
            "/v1/generate": _op(
                "Generate text (native API).",
                "GenerateRequest",
                "GenerateResponse",
                "NativeError",
                settings.max_request_timeout_s,
                "GenerateChunk",
            ),
            "/v1/completions": _op(
                "OpenAI-compatible completions.",
                "CompletionRequest",
                "CompletionResponse",
                "OpenAIError",
                settings.max_request_timeout_s,
                "CompletionChunk",
            ),
            "/v1/chat/completions": _op(
                f"OpenAI-compatible chat. The messages are flattened: {CHAT_TEMPLATE}",
                "ChatRequest",
                "ChatCompletion",
                "OpenAIError",
                settings.max_request_timeout_s,
                "ChatCompletionChunk",
            ),
            "/v1/models": _models_op(),
            "/v1/feedback": _feedback_op(),
            "/healthz": _get("Process alive.", "Health"),
            "/health": _get("vLLM's liveness probe: 200 with an empty body.", None),
            "/readyz": _get(
                "This gateway started and not draining; the upstream's state in the body.",
                "Readiness",
                True,
            ),
            "/metrics": _get("Prometheus metrics.", None),
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
