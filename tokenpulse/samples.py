"""The sample contract between the gateway and the log pipeline, importable by both.

The gateway measures each finished request into a `RequestStats` (plain dataclasses, no
Prometheus) and hands a `Sample` to a `SampleSink`; the log pipeline implements the sink
(`log_pipeline.sink:make_sink`), which the gateway loads by name from its settings. Neither app
imports the other: both import this module, so the arrow from the gateway to the pipeline is a
setting, not an import.

Feedback on a response (`POST /v1/feedback`) travels the same way: the gateway hands a `Feedback`
to a sink that also implements `FeedbackSink` (the pipeline's does); a sink without it only sees
the gateway count the feedback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

# Where the samples live in Elasticsearch and Kibana: the log pipeline installs them under these
# names (log_pipeline/assets/), and the dashboards link analysts to them.
STREAM_PREFIX = "genai-samples"
DATA_VIEW_ID = STREAM_PREFIX


@dataclass(frozen=True, slots=True)
class OutputSignals:
    """Quality signals of one generated output."""

    prompt_tokens: int
    output_tokens: int
    finish_reason: str  # tfserving.signature.FINISH_STOP | FINISH_LENGTH
    empty: bool
    repetition_ratio: float  # share of repeated n-grams, 0..1
    mean_nll: float
    truncated_prompt_tokens: int = 0


@dataclass(slots=True)
class RequestStats:
    """Everything measured about one request, success or error."""

    request_id: str
    route: str  # "generate" | "completions" | "chat"
    model: str = ""
    version: str = ""  # the version that served it ("" when none did)
    version_label: str = ""
    key_id: str = ""
    status: int = 200
    error_code: str = ""
    queue_wait_s: float = 0.0
    upstream_s: float = 0.0
    total_s: float = 0.0
    outputs: list[OutputSignals] = field(default_factory=list)
    rate_limited: str = ""  # "requests" | "tokens" when refused by a rate limit
    shed: bool = False
    breaker_rejected: bool = False
    # streaming (`"stream": true`, SSE): the output arrives in chunks of `continue` calls
    mode: str = "unary"  # "stream" | "unary"
    time_to_first_token_s: float | None = None  # arrival to the first generated token (streams)
    decode_s: float = 0.0  # first token to last token (streams): the decode time, no prefill
    chunks: int = 0  # upstream `continue` calls that produced this stream
    # (seconds since the previous chunk, tokens) of each chunk after the first: inter-token latency
    chunk_gaps: list[tuple[float, int]] = field(default_factory=list)
    disconnected: bool = False  # the client went away mid-stream (upstream work cancelled)

    @property
    def output_tokens(self) -> int:
        """Tokens generated over all outputs."""
        return sum(o.output_tokens for o in self.outputs)

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens over all outputs."""
        return sum(o.prompt_tokens for o in self.outputs)

    @property
    def time_per_output_token_s(self) -> float | None:
        """Seconds per generated token (None when it cannot be measured).

        A stream knows its first token, so this is vLLM's TPOT without the prefill: (last token -
        first token) / (tokens - 1). A unary call only knows its whole upstream time, so there it
        is that time per token (prefill included: one call cannot be split).
        """
        tokens = max((o.output_tokens for o in self.outputs), default=0)
        # rows of one request decode side by side in one batch: divide by the longest output
        if self.time_to_first_token_s is not None:
            return self.decode_s / (tokens - 1) if tokens > 1 else None
        return self.upstream_s / tokens if tokens > 0 else None


@dataclass(frozen=True, slots=True)
class Sample:
    """One finished request: its stats plus the texts (the sink decides what to keep and redact)."""

    stats: RequestStats
    prompts: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    timestamp: float = 0.0  # unix seconds at arrival


@runtime_checkable
class SampleSink(Protocol):
    """Where samples go; `handle` runs on the gateway's loop, off the request path."""

    async def handle(self, sample: Sample) -> None:
        """Take one sample (may be slow; it never delays a response)."""


@runtime_checkable
class NonBlockingSink(Protocol):
    """A sink that takes a sample at once, on the loop's thread, and never blocks (it queues and
    counts its own drops): the gateway calls it directly, without a queue and a task switch of
    its own in front (about 1 % of the gateway's CPU at 2,000 req/s)."""

    def offer(self, sample: Sample) -> bool:
        """Take one sample now; False when it was dropped (the sink counted it)."""

    def offer_feedback(self, feedback: Feedback) -> bool:
        """Take one feedback now; False when it was dropped (the sink counted it)."""


# what a score means, whatever its scale: the sign of `Feedback.value`
FEEDBACK_CLASSES = ("negative", "neutral", "positive")
FEEDBACK_SCALES = ("thumbs", "unit")  # -1, 0 or 1; or 0 to 1 (0.5 is neutral)


def feedback_value(score: float, scale: str) -> float:
    """A score on its scale as -1 .. 1 (thumbs as given, unit as 2 * score - 1)."""
    return float(score) if scale == "thumbs" else 2.0 * float(score) - 1.0


def feedback_class(value: float) -> str:
    """negative, neutral or positive: the sign of a -1 .. 1 value."""
    return "negative" if value < 0 else "positive" if value > 0 else "neutral"


@dataclass(frozen=True, slots=True)
class Feedback:
    """A client's score of one response, as the gateway accepted it."""

    request_id: str  # the response id without its cmpl-/gen- prefix (the sample's request id)
    response_id: str  # as the client sent it (cmpl-..., gen-...)
    key_id: str  # the key that gave it
    score: float  # as sent, on `scale`
    scale: str  # FEEDBACK_SCALES
    comment: str = ""  # free text, not yet redacted
    timestamp: float = 0.0  # unix seconds at arrival
    # the response's, when the gateway still remembered it ("" when not)
    model: str = ""
    version: str = ""
    version_label: str = ""

    @property
    def value(self) -> float:
        """The score as -1 .. 1."""
        return feedback_value(self.score, self.scale)

    @property
    def score_class(self) -> str:
        """negative, neutral or positive."""
        return feedback_class(self.value)


@runtime_checkable
class FeedbackSink(Protocol):
    """A sink that also stores feedback; `feedback` runs on the gateway's loop, off the request
    path."""

    async def feedback(self, feedback: Feedback) -> None:
        """Take one feedback (it never delays the response)."""
