"""`POST /v1/completions`: the OpenAI-compatible request and response, as the `openai` SDK expects.

The version that served is in `system_fingerprint` (`gen:v2`), in the `X-Model-Version` header and
in the extra `tokenpulse` object (signals and timings), which the SDK keeps in `model_extra`.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, Field

from serving.gateway.errors import BadRequest, openai_body
from serving.gateway.fields import check_inert
from serving.gateway.jobs import (
    Job,
    Limits,
    PositiveInt,
    check_max_new_tokens,
    check_prompts,
    fit_or_recount,
    stream_options,
    validate_body,
)
from serving.gateway.protocol import (
    ChunkStream,
    CompletionUsage,
    Endpoint,
    Extension,
    OpenAIChunk,
    OpenAIRequest,
    extension,
    fingerprint,
    openai_job,
    usage,
)
from serving.gateway.streaming import Piece
from tokenpulse.samples import RequestStats


class CompletionRequest(OpenAIRequest):
    """OpenAI `completions.create` parameters the model honours (and `OpenAIRequest`'s)."""

    prompt: str | list[str] = Field(description="A string or a list of strings.")
    max_tokens: PositiveInt | None = Field(
        None, description="Default 16; prompt tokens + max_tokens must fit the model's window."
    )


class Choice(BaseModel):
    """One completion."""

    index: int
    text: str
    finish_reason: str
    logprobs: None = None


class CompletionResponse(BaseModel):
    """OpenAI `text_completion` object plus a `tokenpulse` extension."""

    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    system_fingerprint: str
    choices: list[Choice]
    usage: CompletionUsage
    tokenpulse: Extension


def parse(raw: bytes, limits: Limits) -> Job:
    """Validate a completions body (OpenAI answers bad parameters with 400)."""
    req: CompletionRequest = validate_body(CompletionRequest, raw, BadRequest)
    check_inert(req.model_extra or {})
    prompts = [req.prompt] if isinstance(req.prompt, str) else list(req.prompt)
    check_prompts(prompts, limits, BadRequest)
    max_tokens = req.max_tokens if req.max_tokens is not None else limits.default_max_new_tokens
    check_max_new_tokens(max_tokens, limits, "max_tokens", BadRequest)
    options = stream_options(req.stream, req.stream_options, BadRequest)
    prompts, max_tokens, recount = fit_or_recount(
        prompts, max_tokens, limits, req.truncate_prompt_tokens
    )
    return openai_job(req, prompts, max_tokens, options, recount=recount)


def respond(job: Job, texts: list[str], stats: RequestStats) -> CompletionResponse:
    """The OpenAI response, as `/openapi.json` declares it."""
    return CompletionResponse.model_construct(
        id=f"cmpl-{stats.request_id}",
        object="text_completion",
        created=int(time.time()),
        model=stats.model,
        system_fingerprint=fingerprint(stats),
        choices=[
            Choice.model_construct(index=i, text=text, finish_reason=out.finish_reason)
            for i, (text, out) in enumerate(zip(texts, stats.outputs, strict=True))
        ],
        usage=usage(stats),
        tokenpulse=extension(stats),
    )


class ChunkChoice(BaseModel):
    """One completion's new text in a stream; `finish_reason` on its last chunk."""

    index: int
    text: str
    finish_reason: str | None
    logprobs: None = None


class CompletionChunk(OpenAIChunk):
    """One `text_completion` event of a stream (`stream: true`)."""

    object: Literal["text_completion"] = "text_completion"
    choices: list[ChunkChoice]


class CompletionStream(ChunkStream):
    """The events of one streamed completion."""

    event = CompletionChunk
    id_prefix = "cmpl-"

    def choice(self, piece: Piece) -> BaseModel:
        """A completion's new text; its finish reason on its last piece."""
        return ChunkChoice.model_construct(
            index=piece.index, text=piece.text, finish_reason=piece.finish_reason
        )


ENDPOINT = Endpoint("completions", parse, respond, CompletionStream, openai_body)
