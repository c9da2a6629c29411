"""What the endpoints share: the response pieces (signals, timings, OpenAI usage and extension),
the sampling helpers, and `ChunkStream`, the base of every endpoint's stream of events.

The endpoints (`native`, `completions`, `chat`) stand side by side on this module; none imports
another. Responses are built with `model_construct`: the gateway fills every field from values
it has already checked, so validating each response again only costs time; the tests validate
what each `respond` builds against the same models, once.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from serving.gateway.errors import BadRequest, GatewayError
from serving.gateway.jobs import (
    TRUNCATE_DESCRIPTION,
    Job,
    Limits,
    Recount,
    SeedInt,
    StreamOptions,
    TopK,
    TruncateTokens,
)
from serving.gateway.sse import Progress
from serving.gateway.streaming import Piece
from tokenpulse.samples import OutputSignals, RequestStats

TOP_K_DESCRIPTION = (
    "vLLM's extension (the openai SDK sends it through extra_body): sample from the k most "
    "likely tokens; 0 or -1: no cut."
)
IGNORE_EOS_DESCRIPTION = (
    "vLLM's extension: decode past the end-of-text token, to max_tokens or a stop sequence "
    "(benchmarks use it for fixed output lengths)."
)


class OpenAIRequest(BaseModel):
    """The parameters both OpenAI endpoints take; any other field is checked by the one rule of
    `serving.gateway.fields` (off values accepted, the rest a 400 naming it)."""

    model_config = ConfigDict(strict=True, extra="allow")

    model: str = Field(min_length=1, max_length=128)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: TopK | None = Field(None, description=TOP_K_DESCRIPTION)
    seed: SeedInt | None = None
    stop: str | list[str] | None = None
    ignore_eos: bool | None = Field(None, description=IGNORE_EOS_DESCRIPTION)
    user: str | None = Field(None, max_length=256)
    stream: bool | None = None
    stream_options: dict[str, Any] | None = None
    # vLLM's extension (the openai SDK sends it through extra_body)
    truncate_prompt_tokens: TruncateTokens | None = Field(None, description=TRUNCATE_DESCRIPTION)


def openai_job(
    req: OpenAIRequest,
    prompts: list[str],
    max_tokens: int,
    options: StreamOptions,
    extra_stops: tuple[str, ...] = (),
    recount: Recount | None = None,
) -> Job:
    """The job of an OpenAI request, with OpenAI's defaults (temperature 1, no cuts, a random
    seed), `extra_stops` after the client's own, and the window check left to the model's
    token counts (`recount`), if any."""
    return Job(
        model=req.model,
        prompts=prompts,
        max_new_tokens=max_tokens,
        temperature=1.0 if req.temperature is None else req.temperature,
        top_k=top_k(req.top_k),
        top_p=1.0 if req.top_p is None else req.top_p,
        seed=req.seed if req.seed is not None else secrets.randbits(31),
        user=req.user,
        stop=stops(req.stop) + extra_stops,
        ignore_eos=bool(req.ignore_eos),
        truncate_prompt_tokens=req.truncate_prompt_tokens,
        stream=bool(req.stream),
        include_usage=options.include_usage,
        continuous_usage=options.continuous_usage_stats,
        recount=recount,
    )


class Signals(BaseModel):
    """Quality signals of the output."""

    empty_output: bool
    repetition_ratio: float
    mean_nll: float
    truncated_prompt_tokens: int


class Timings(BaseModel):
    """Where the time went, in seconds."""

    queue_wait_s: float
    upstream_s: float
    total_s: float
    time_per_output_token_s: float | None


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


class OpenAIChunk(BaseModel):
    """The fields every OpenAI stream event has (completions and chat); with
    `stream_options.include_usage` a last event has no choices and the usage."""

    id: str
    object: str
    created: int
    model: str
    system_fingerprint: str
    choices: list[Any]
    usage: CompletionUsage | None = None


def timings(stats: RequestStats) -> Timings:
    """The timings block of every endpoint."""
    return Timings.model_construct(
        queue_wait_s=round(stats.queue_wait_s, 6),
        upstream_s=round(stats.upstream_s, 6),
        total_s=round(stats.total_s, 6),
        time_per_output_token_s=stats.time_per_output_token_s,
    )


def signals(out: OutputSignals) -> Signals:
    """The quality signals of one output."""
    return Signals.model_construct(
        empty_output=out.empty,
        repetition_ratio=round(out.repetition_ratio, 6),
        mean_nll=out.mean_nll,
        truncated_prompt_tokens=out.truncated_prompt_tokens,
    )


def extension(stats: RequestStats) -> Extension:
    """The `tokenpulse` object of the OpenAI endpoints' answers."""
    return Extension.model_construct(
        version=stats.version,
        version_label=stats.version_label or None,
        signals=[signals(o) for o in stats.outputs],
        timings=timings(stats),
    )


def fingerprint(stats: RequestStats) -> str:
    """OpenAI's `system_fingerprint`: the model and the version that served (`gen:v2`)."""
    return f"{stats.model}:v{stats.version}"


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


MAX_STOP_BYTES = 256  # a stop is matched against the generated tail at every decode step


def stops(stop: str | list[str] | None) -> tuple[str, ...]:
    """OpenAI's `stop`: at most 4 non-empty sequences."""
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if len(stops) > 4:
        raise BadRequest("stop takes at most 4 sequences", param="stop")
    if any(not s for s in stops):
        raise BadRequest("stop sequences must not be empty", param="stop")
    if any(len(s.encode()) > MAX_STOP_BYTES for s in stops):
        # each decode step compares every row's tail with its stops inside the model graph
        raise BadRequest(f"stop sequences are at most {MAX_STOP_BYTES} bytes each", param="stop")
    return tuple(stops)


def top_k(value: int | None) -> int:
    """vLLM's `top_k` as the model takes it: -1 (vLLM's "off") and 0 are no cut."""
    return 0 if value is None or value < 0 else value


class ChunkStream:
    """The events of one stream in an endpoint's format, id and `created` fixed for the stream:
    a subclass says how one piece and one event look. With vLLM's
    `stream_options.continuous_usage_stats`, each event carries the usage so far; with
    `include_usage`, a last event without choices carries the whole usage."""

    def __init__(self, job: Job, stats: RequestStats, progress: Progress | None = None) -> None:
        self.job, self.stats = job, stats
        self.created = int(time.time())
        self._progress = progress if job.continuous_usage else None

    event: ClassVar[type[OpenAIChunk]]  # the endpoint's event model; its `object` by default
    id_prefix: ClassVar[str]  # before the request id, in `id`

    def chunk(self, choices: list[BaseModel], usage: CompletionUsage | None) -> BaseModel:
        """One event carrying `choices` (and `usage`, or None)."""
        s = self.stats
        return self.event.model_construct(
            id=f"{self.id_prefix}{s.request_id}",
            created=self.created,
            model=s.model,
            system_fingerprint=fingerprint(s),
            choices=choices,
            usage=usage,
        )

    def choice(self, piece: Piece) -> BaseModel:
        """The choice that carries one piece of text."""
        raise NotImplementedError

    def so_far(self) -> CompletionUsage | None:
        """The usage up to now, when the client asked for it on every event."""
        return usage(self.stats, self._progress) if self._progress else None

    def begin(self) -> list[BaseModel]:
        """Events before the first text: none unless the endpoint says otherwise."""
        return []

    def pieces(self, pieces: list[Piece]) -> list[BaseModel]:
        """One event per piece of text."""
        return [self.chunk([self.choice(p)], self.so_far()) for p in pieces]

    def end(self) -> list[BaseModel]:
        """The usage event, when asked for (after `close()` filled the outputs)."""
        return [self.chunk([], usage(self.stats))] if self.job.include_usage else []


@dataclass(frozen=True)
class Endpoint:
    """What one generation endpoint adds to the shared handler: its `route` label, how it reads
    a body, how it answers (unary), how it streams, and its error shape."""

    route: str
    parse: Callable[[bytes, Limits], Job]
    respond: Callable[[Job, list[str], RequestStats], BaseModel]
    stream: type[ChunkStream]
    error_body: Callable[[GatewayError, str], BaseModel]
