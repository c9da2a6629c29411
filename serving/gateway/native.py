"""`POST /v1/generate`: the native request and response."""

from __future__ import annotations

import secrets

from pydantic import BaseModel, ConfigDict, Field

from serving.gateway.errors import InvalidParameter, native_body
from serving.gateway.jobs import (
    TRUNCATE_DESCRIPTION,
    Job,
    JsonInt,
    Limits,
    PositiveInt,
    SeedInt,
    TruncateTokens,
    check_max_new_tokens,
    check_prompts,
    fit_or_recount,
    validate_body,
)
from serving.gateway.protocol import (
    ChunkStream,
    CompletionUsage,
    Endpoint,
    Signals,
    Timings,
    signals,
    timings,
)
from serving.gateway.streaming import Piece
from tokenpulse.samples import OutputSignals, RequestStats

LABEL_PATTERN = r"^[A-Za-z0-9_]+$"


class GenerateRequest(BaseModel):
    """Native generation request."""

    model_config = ConfigDict(strict=True, extra="forbid")

    prompt: str = Field(min_length=1, description="Text to continue.")
    max_new_tokens: PositiveInt | None = Field(
        None, description="Most tokens to generate (default: the deployment's)."
    )
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="0 = greedy.")
    top_k: JsonInt = Field(0, ge=0, le=100_000, description="0 = no top-k cut.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="1 = no nucleus cut.")
    seed: SeedInt | None = Field(None, description="Sampling seed (default: random).")
    model: str | None = Field(None, min_length=1, max_length=128)
    version_label: str | None = Field(None, pattern=LABEL_PATTERN, max_length=64)
    user: str | None = Field(None, max_length=256, description="Caller id for canary stickiness.")
    truncate_prompt_tokens: TruncateTokens | None = Field(None, description=TRUNCATE_DESCRIPTION)
    stream: bool = Field(
        False,
        description="Answer with server-sent events: `data: <GenerateChunk>` as text arrives, "
        "a last one with the usage, then `data: [DONE]`.",
    )


class ModelRef(BaseModel):
    """Which model and version served."""

    name: str
    version: str
    version_label: str | None


class GenerateUsage(BaseModel):
    """Token counts."""

    prompt_tokens: int
    output_tokens: int
    total_tokens: int


class GenerateResponse(BaseModel):
    """Native generation response."""

    id: str
    text: str
    model: ModelRef
    finish_reason: str
    usage: GenerateUsage
    signals: Signals
    timings: Timings


def parse(raw: bytes, limits: Limits) -> Job:
    """Validate a native request body."""
    req: GenerateRequest = validate_body(GenerateRequest, raw, InvalidParameter)
    check_prompts([req.prompt], limits, InvalidParameter)
    max_new = req.max_new_tokens or limits.default_max_new_tokens
    check_max_new_tokens(max_new, limits, "max_new_tokens", InvalidParameter)
    prompts, _, recount = fit_or_recount([req.prompt], max_new, limits, req.truncate_prompt_tokens)
    return Job(
        model=req.model or limits.default_model,
        prompts=prompts,
        max_new_tokens=max_new,
        temperature=req.temperature,
        top_k=req.top_k,
        top_p=req.top_p,
        seed=req.seed if req.seed is not None else secrets.randbits(31),
        version_label=req.version_label,
        user=req.user,
        truncate_prompt_tokens=req.truncate_prompt_tokens,
        stream=req.stream,
        recount=recount,
    )


def _model_ref(stats: RequestStats) -> ModelRef:
    return ModelRef.model_construct(
        name=stats.model, version=stats.version, version_label=stats.version_label or None
    )


def _usage(out: OutputSignals) -> GenerateUsage:
    return GenerateUsage.model_construct(
        prompt_tokens=out.prompt_tokens,
        output_tokens=out.output_tokens,
        total_tokens=out.prompt_tokens + out.output_tokens,
    )


def respond(job: Job, texts: list[str], stats: RequestStats) -> GenerateResponse:
    """The native response (one prompt, one output), as `/openapi.json` declares it."""
    out = stats.outputs[0]
    return GenerateResponse.model_construct(
        id=f"gen-{stats.request_id}",
        text=texts[0],
        model=_model_ref(stats),
        finish_reason=out.finish_reason,
        usage=_usage(out),
        signals=signals(out),
        timings=timings(stats),
    )


class GenerateChunk(BaseModel):
    """One event of a streamed `/v1/generate`: new text; the last one (empty text) carries the
    finish reason and the usage."""

    id: str
    text: str
    finish_reason: str | None
    model: ModelRef
    usage: GenerateUsage | None = None


class NativeStream(ChunkStream):
    """The events of one streamed native generation: text, then the finish reason and the
    usage in one last event."""

    def chunk(self, choices: list[BaseModel], usage: CompletionUsage | None) -> BaseModel:
        """The native event has no choices: `choice` built the whole event already, and its
        usage comes once, at the end."""
        (event,) = choices
        return event

    def choice(self, piece: Piece) -> BaseModel:
        """An event with new text (the finish reason waits for the last event)."""
        return self._event(piece.text, None, None)

    def pieces(self, pieces: list[Piece]) -> list[BaseModel]:
        """One event per piece of text; empty pieces send nothing."""
        return super().pieces([p for p in pieces if p.text])

    def end(self) -> list[BaseModel]:
        """The finish reason and the usage."""
        if not self.stats.outputs:
            return []
        out = self.stats.outputs[0]
        return [self._event("", out.finish_reason, _usage(out))]

    def _event(self, text: str, finish: str | None, usage: GenerateUsage | None) -> BaseModel:
        return GenerateChunk.model_construct(
            id=f"gen-{self.stats.request_id}",
            text=text,
            finish_reason=finish,
            model=_model_ref(self.stats),
            usage=usage,
        )


ENDPOINT = Endpoint("generate", parse, respond, NativeStream, native_body)
