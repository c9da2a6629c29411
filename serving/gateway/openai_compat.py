"""`POST /v1/completions`: the OpenAI-compatible request and response, as the `openai` SDK expects.

The version that served is in `system_fingerprint` (`gen:v2`), in the `X-Model-Version` header and
in the extra `tokenpulse` object (signals and timings), which the SDK keeps in `model_extra`.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from serving.gateway.errors import BadRequest
from serving.gateway.fields import check_inert
from serving.gateway.jobs import (
    TRUNCATE_DESCRIPTION,
    Job,
    Limits,
    PositiveInt,
    SeedInt,
    TopK,
    TruncateTokens,
    check_max_new_tokens,
    check_prompts,
    fit_window,
    stream_options,
    validate_body,
)
from serving.gateway.native import Signals, Timings, signals, timings
from serving.gateway.sse import Progress
from serving.gateway.streaming import Piece
from tokenpulse.samples import RequestStats

TOP_K_DESCRIPTION = (
    "vLLM's extension (the openai SDK sends it through extra_body): sample from the k most "
    "likely tokens; 0 or -1: no cut."
)


class CompletionRequest(BaseModel):
    """OpenAI `completions.create` parameters the model honours; any other field is checked by
    the one rule of `serving.gateway.fields` (off values accepted, the rest a 400 naming it)."""

    model_config = ConfigDict(strict=True, extra="allow")

    model: str = Field(min_length=1, max_length=128)
    prompt: str | list[str] = Field(description="A string or a list of strings.")
    max_tokens: PositiveInt | None = Field(
        None, description="Default 16; prompt tokens + max_tokens must fit the model's window."
    )
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: TopK | None = Field(None, description=TOP_K_DESCRIPTION)
    seed: SeedInt | None = None
    stop: str | list[str] | None = None
    user: str | None = Field(None, max_length=256)
    stream: bool | None = None
    stream_options: dict[str, Any] | None = None
    # vLLM's extension (the openai SDK sends it through extra_body)
    truncate_prompt_tokens: TruncateTokens | None = Field(None, description=TRUNCATE_DESCRIPTION)


class Choice(BaseModel):
    """One completion."""

    index: int
    text: str
    finish_reason: str
    logprobs: None = None


class CompletionUsage(BaseModel):
    """OpenAI usage block."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class Extension(BaseModel):
    """What the OpenAI object has no field for: the version that served, signals and timings."""

    version: str
    version_label: str | None
    signals: list[Signals]
    timings: Timings


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


def stops(stop: str | list[str] | None) -> tuple[str, ...]:
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if len(stops) > 4:
        raise BadRequest("stop takes at most 4 sequences", param="stop")
    if any(not s for s in stops):
        raise BadRequest("stop sequences must not be empty", param="stop")
    return tuple(stops)


def parse(raw: bytes, limits: Limits) -> Job:
    """Validate a completions body (OpenAI answers bad parameters with 400)."""
    req: CompletionRequest = validate_body(CompletionRequest, raw, BadRequest)
    check_inert(req.model_extra or {})
    prompts = [req.prompt] if isinstance(req.prompt, str) else list(req.prompt)
    check_prompts(prompts, limits, BadRequest)
    max_tokens = req.max_tokens if req.max_tokens is not None else limits.default_max_new_tokens
    check_max_new_tokens(max_tokens, limits, "max_tokens", BadRequest)
    options = stream_options(req.stream, req.stream_options, BadRequest)
    prompts, max_tokens = fit_window(prompts, max_tokens, limits, req.truncate_prompt_tokens)
    return Job(
        model=req.model,
        prompts=prompts,
        max_new_tokens=max_tokens,
        temperature=1.0 if req.temperature is None else req.temperature,
        top_k=top_k(req.top_k),
        top_p=1.0 if req.top_p is None else req.top_p,
        seed=req.seed if req.seed is not None else secrets.randbits(31),
        user=req.user,
        stop=stops(req.stop),
        truncate_prompt_tokens=req.truncate_prompt_tokens,
        stream=bool(req.stream),
        include_usage=options.include_usage,
        continuous_usage=options.continuous_usage_stats,
    )


def top_k(value: int | None) -> int:
    """vLLM's `top_k` as the model takes it: -1 (vLLM's "off") and 0 are no cut."""
    return 0 if value is None or value < 0 else value


def respond(job: Job, texts: list[str], stats: RequestStats) -> CompletionResponse:
    """The OpenAI response, as `/openapi.json` declares it."""
    prompt_tokens = stats.prompt_tokens
    output_tokens = stats.output_tokens
    # built unvalidated from checked values, as native.respond (test_openai_compat.py validates)
    return CompletionResponse.model_construct(
        id=f"cmpl-{stats.request_id}",
        object="text_completion",
        created=int(time.time()),
        model=stats.model,
        system_fingerprint=f"{stats.model}:v{stats.version}",
        choices=[
            Choice.model_construct(index=i, text=text, finish_reason=out.finish_reason)
            for i, (text, out) in enumerate(zip(texts, stats.outputs, strict=True))
        ],
        usage=CompletionUsage.model_construct(
            prompt_tokens=prompt_tokens,
            completion_tokens=output_tokens,
            total_tokens=prompt_tokens + output_tokens,
        ),
        tokenpulse=Extension.model_construct(
            version=stats.version,
            version_label=stats.version_label or None,
            signals=[signals(o) for o in stats.outputs],
            timings=timings(stats),
        ),
    )


class ChunkChoice(BaseModel):
    """One completion's new text in a stream; `finish_reason` on its last chunk."""

    index: int
    text: str
    finish_reason: str | None
    logprobs: None = None


class CompletionChunk(BaseModel):
    """One `text_completion` event of a stream (`stream: true`); with
    `stream_options.include_usage` a last event has no choices and the usage."""

    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    system_fingerprint: str
    choices: list[ChunkChoice]
    usage: CompletionUsage | None = None


def usage(stats: RequestStats, progress: Progress | None = None) -> CompletionUsage:
    """The usage block of the recorded outputs, or of a stream's `progress` so far."""
    prompt_tokens, output_tokens = (
        progress() if progress else (stats.prompt_tokens, stats.output_tokens)
    )
    return CompletionUsage.model_construct(
        prompt_tokens=prompt_tokens,
        completion_tokens=output_tokens,
        total_tokens=prompt_tokens + output_tokens,
    )


class CompletionStream:
    """The events of one streamed completion (id and `created` fixed for the stream); with
    vLLM's `stream_options.continuous_usage_stats`, each event carries the usage so far."""

    def __init__(self, job: Job, stats: RequestStats, progress: Progress | None = None) -> None:
        self.job, self.stats = job, stats
        self.created = int(time.time())
        self._progress = progress if job.continuous_usage else None

    def _so_far(self) -> CompletionUsage | None:
        return usage(self.stats, self._progress) if self._progress else None

    def _chunk(self, choices: list[ChunkChoice], usage: CompletionUsage | None) -> BaseModel:
        s = self.stats
        return CompletionChunk.model_construct(
            id=f"cmpl-{s.request_id}",
            object="text_completion",
            created=self.created,
            model=s.model,
            system_fingerprint=f"{s.model}:v{s.version}",
            choices=choices,
            usage=usage,
        )

    def begin(self) -> list[BaseModel]:
        """Events before the first text: none for completions."""
        return []

    def pieces(self, pieces: list[Piece]) -> list[BaseModel]:
        """One event per piece of text."""
        choice = ChunkChoice.model_construct
        return [
            self._chunk(
                [choice(index=p.index, text=p.text, finish_reason=p.finish_reason)],
                self._so_far(),
            )
            for p in pieces
        ]

    def end(self) -> list[BaseModel]:
        """The usage event, when asked for (after `close()` filled the outputs)."""
        return [self._chunk([], usage(self.stats))] if self.job.include_usage else []
