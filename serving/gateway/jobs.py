"""What both endpoints turn a request into: model rows for one upstream call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from annotated_types import Ge, Le
from pydantic import BaseModel, BeforeValidator, ValidationError

from serving.gateway.errors import BadRequest, ContextLengthExceeded, GatewayError, PayloadTooLarge
from tokenpulse.tfserving.signature import stop_slots

INT64 = 2**63 - 1


def _whole_float_to_int(value: Any) -> Any:
    # JSON Schema counts 2.0 as an integer; strings and bools stay refused
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# int fields that also take whole floats (2.0), as JSON Schema's "integer" does; constraints go
# before the validator so they reach the JSON schema as minimum/maximum
JsonInt = Annotated[int, BeforeValidator(_whole_float_to_int)]
PositiveInt = Annotated[int, Ge(1), BeforeValidator(_whole_float_to_int)]
SeedInt = Annotated[int, Ge(-INT64 - 1), Le(INT64), BeforeValidator(_whole_float_to_int)]
# vLLM's top_k: -1 (vLLM's "off") or 0 is no cut, k keeps the k most likely tokens
TopK = Annotated[int, Ge(-1), Le(100_000), BeforeValidator(_whole_float_to_int)]
# vLLM's parameter: -1 lets the model keep the end of the prompt that fits, k >= 1 keeps the last k
# bytes (vLLM's k tokens; here k tokens at most)
TruncateTokens = Literal[-1] | PositiveInt
TRUNCATE_DESCRIPTION = (
    "Unset: a prompt longer than the model's window is refused with 400. "
    "-1: the model keeps the end of the prompt that fits. k: keep the prompt's last k bytes "
    "(k tokens at most)."
)


@dataclass
class Limits:
    """Per-deployment bounds the schemas cannot know."""

    max_prompt_chars: int
    max_prompts: int
    max_new_tokens_limit: int
    default_max_new_tokens: int
    default_model: str
    context_window_tokens: int


@dataclass(frozen=True)
class Recount:
    """A window check the byte bound cannot settle: the model's own count of each prompt's
    tokens settles it before the job runs (`Job.settle`, `Pipeline.settle_window`). What the
    request asked for (`max_new_tokens`; None: the rest of the window), where its prompt came
    from, and the limits it was parsed under."""

    max_new_tokens: int | None
    where: str
    limits: Limits


@dataclass
class Job:
    """One request, validated: the rows to run and how to shape the answer."""

    model: str
    prompts: list[str]
    max_new_tokens: int
    temperature: float
    top_k: int
    top_p: float
    seed: int
    version_label: str | None = None
    user: str | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False  # vLLM's: decode past end-of-text (a model input)
    truncate_prompt_tokens: int | None = None
    stream: bool = False  # answer with server-sent events, chunk by chunk
    include_usage: bool = False  # streams: a last event with the usage (stream_options)
    continuous_usage: bool = False  # streams: the usage so far on every event (vLLM's option)
    recount: Recount | None = None  # the window check the model's token counts settle

    def settle(self, counts: list[int]) -> None:
        """Settle `recount` on the model's count of each prompt's tokens (a start token
        included): the new tokens the job gets, or ContextLengthExceeded naming the window."""
        if self.recount is None:
            return
        r = self.recount
        self.max_new_tokens = fit_tokens(
            max(counts), r.max_new_tokens, r.limits, self.truncate_prompt_tokens, r.where
        )
        self.recount = None

    @property
    def token_budget(self) -> int:
        """Tokens to reserve against the key's token limit."""
        return self.max_new_tokens * len(self.prompts)

    def rows(self, in_graph: bool = False) -> list[dict[str, Any]]:
        """REST `instances`, one per prompt, per the serving_default contract."""
        return [
            {
                "prompt": p,
                "max_new_tokens": self.max_new_tokens,
                "temperature": float(self.temperature),
                "top_k": self.top_k,
                "top_p": float(self.top_p),
                "seed": self.seed,
                **self.ending(in_graph),
            }
            for p in self.prompts
        ]

    def ending(self, in_graph: bool) -> dict[str, Any]:
        """The `stop` and `ignore_eos` inputs for a version that takes them (`in_graph`); an
        older export gets neither (the gateway cuts its text at the stop sequences)."""
        if in_graph:
            return {"stop": stop_slots(self.stop), "ignore_eos": int(self.ignore_eos)}
        if self.ignore_eos:
            raise BadRequest(
                "ignore_eos: this model version was exported without the input to decode past "
                "its end-of-text token; leave it out or route to a newer version",
                param="ignore_eos",
            )
        return {}

    def params(self) -> dict[str, Any]:
        """Sampling parameters and stop sequences, for samples (the sink redacts the strings)."""
        return {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "seed": self.seed,
            **({"stop": list(self.stop)} if self.stop else {}),
        }


def validate_body(model: type[BaseModel], raw: bytes, invalid: type[GatewayError]) -> Any:
    """Parse JSON bytes into `model`; malformed JSON or UTF-8 → 400, bad fields → `invalid`."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        if err["type"] == "json_invalid":
            raise BadRequest(
                f"malformed json: {err['msg'].removeprefix('Invalid JSON: ')}"
            ) from exc
        loc = ".".join(str(p) for p in err["loc"])
        message = f"{loc}: {err['msg']}" if loc else f"body: {err['msg']}"
        raise invalid(message, param=str(err["loc"][0]) if err["loc"] else None) from exc


@dataclass(frozen=True)
class StreamOptions:
    """What `stream_options` asked for."""

    include_usage: bool = False
    continuous_usage_stats: bool = False


def stream_options(
    stream: bool | None, options: dict[str, Any] | None, invalid: type[GatewayError]
) -> StreamOptions:
    """`stream_options` as OpenAI and vLLM take it: only with `stream`; `include_usage` and
    vLLM's `continuous_usage_stats` (booleans), OpenAI's `include_obfuscation` only off."""
    if options is None:
        return StreamOptions()
    if not stream:
        raise invalid("stream_options is only allowed when stream is true", param="stream_options")
    unknown = set(options) - {"include_usage", "continuous_usage_stats", "include_obfuscation"}
    if unknown:
        name = sorted(unknown)[0]
        raise invalid(f"stream_options: unknown option {name!r}", param="stream_options")
    for name, value in options.items():
        if not isinstance(value, bool):
            raise invalid(f"stream_options.{name} must be a boolean", param="stream_options")
    if options.get("include_obfuscation"):
        raise invalid(
            "stream_options.include_obfuscation: the gateway adds no obfuscation padding "
            "(accepted: false)",
            param="stream_options",
        )
    return StreamOptions(
        include_usage=options.get("include_usage", False),
        continuous_usage_stats=options.get("continuous_usage_stats", False),
    )


def include_usage(
    stream: bool | None, options: dict[str, Any] | None, invalid: type[GatewayError]
) -> bool:
    """Whether a stream ends with a usage event (`stream_options.include_usage`)."""
    return stream_options(stream, options, invalid).include_usage


def check_prompts(prompts: list[str], limits: Limits, invalid: type[GatewayError]) -> None:
    """Count and size limits on prompts."""
    if not prompts:
        raise invalid("prompt must not be empty", param="prompt")
    if len(prompts) > limits.max_prompts:
        raise invalid(f"at most {limits.max_prompts} prompts per request", param="prompt")
    for p in prompts:
        if not p:
            raise invalid("prompt must not be empty", param="prompt")
        if len(p) > limits.max_prompt_chars:
            raise PayloadTooLarge(
                f"prompt has {len(p)} characters, the limit is {limits.max_prompt_chars}",
                param="prompt",
            )


def check_max_new_tokens(
    value: int, limits: Limits, param: str, invalid: type[GatewayError]
) -> None:
    """The deployment's cap on generated tokens per output."""
    if value > limits.max_new_tokens_limit:
        raise invalid(f"{param} must be at most {limits.max_new_tokens_limit}", param=param)


def _keep_last(prompt: str, tokens: int) -> str:
    """The prompt's last `tokens` bytes, dropping a character cut in half at the start."""
    raw = prompt.encode("utf-8")
    if tokens <= 0:
        return ""
    return prompt if len(raw) <= tokens else raw[-tokens:].decode("utf-8", "ignore")


def byte_bound(prompt: str) -> int:
    """The most tokens a model can make of `prompt`, its start token included: its UTF-8 bytes
    and one (every token of a byte-level vocabulary stands for at least one byte). A byte
    model's count; a subword model's own is lower (`Recount`)."""
    return len(prompt.encode("utf-8")) + 1


def cut_prompts(prompts: list[str], truncate: int | None) -> list[str]:
    """`truncate_prompt_tokens` k >= 1: each prompt's last k bytes, which are k tokens at most."""
    if truncate is not None and truncate > 0:
        return [_keep_last(p, truncate) for p in prompts]
    return prompts


def fit_tokens(
    longest: int, max_new_tokens: int | None, limits: Limits, truncate: int | None, where: str
) -> int:
    """The new tokens a request gets when its longest prompt is `longest` tokens, as vLLM checks
    it: prompt tokens + max_new_tokens <= window, else a 400 `context_length_exceeded` in vLLM's
    words. `max_new_tokens` None (chat without max_tokens): the rest of the window after the
    longest prompt, up to the deployment's cap.

    Whatever passes runs whole: the model's own rule (`serving/model/generate.py:_budgets`)
    drops prompt tokens or caps the output only for what does not fit, which only
    `truncate_prompt_tokens: -1` lets through (see `_cut_by_the_model`).
    """
    window = limits.context_window_tokens
    if truncate == -1:
        return _cut_by_the_model(longest, max_new_tokens, limits, where)
    if max_new_tokens is None:
        if longest >= window:
            raise ContextLengthExceeded(
                f"This model's maximum context length is {window} tokens. However, your request "
                f"has {longest} input tokens. Please reduce the length of the input {where}.",
                param=where,
            )
        return min(window - longest, limits.max_new_tokens_limit)
    if longest + max_new_tokens > window:
        raise ContextLengthExceeded(
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{longest + max_new_tokens} tokens ({longest} in the {where}, {max_new_tokens} in "
            f"the completion). Please reduce the length of the {where} or completion, or set "
            "truncate_prompt_tokens (-1 keeps the end of the prompt that fits).",
            param=where,
        )
    return max_new_tokens


def fit_or_recount(
    prompts: list[str],
    max_new_tokens: int | None,
    limits: Limits,
    truncate: int | None,
    where: str = "prompt",
) -> tuple[list[str], int, Recount | None]:
    """Apply `truncate_prompt_tokens` (`cut_prompts`) and check the window (`fit_tokens`) at
    parse time, where the model's counts are not known yet: settled by the byte bound when it
    passes and gives what a prompt of one token would get, so that every count in between gives
    it too (a short prompt's case); else the job carries a `Recount` and, until it is settled,
    the most `max_new_tokens` any count could give (what the rate limiter reserves). A refusal
    waits for the model's counts too, so that it names them. Returns (cut prompts, new tokens,
    recount or None)."""
    cut = cut_prompts(prompts, truncate)
    try:
        most = fit_tokens(1, max_new_tokens, limits, truncate, where)
    except ContextLengthExceeded:  # no count fits; the model's says by how much
        cap = limits.max_new_tokens_limit if max_new_tokens is None else max_new_tokens
        return cut, cap, Recount(max_new_tokens, where, limits)
    try:
        bounded: int | None = fit_tokens(
            max(byte_bound(p) for p in cut), max_new_tokens, limits, truncate, where
        )
    except ContextLengthExceeded:
        bounded = None
    return cut, most, None if bounded == most else Recount(max_new_tokens, where, limits)


def _cut_by_the_model(longest: int, max_new_tokens: int | None, limits: Limits, where: str) -> int:
    """`truncate_prompt_tokens: -1`: the model keeps the end of a prompt that does not fit and
    room for min(max_new_tokens, window / 2) new tokens; more would be cut silently, so a
    completion over half the window is refused when the prompt must be cut."""
    window = limits.context_window_tokens
    if max_new_tokens is None:
        rest = window - longest if longest < window else window // 2
        return min(rest, limits.max_new_tokens_limit)
    if longest + max_new_tokens > window and max_new_tokens > window // 2:
        raise ContextLengthExceeded(
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{longest + max_new_tokens} tokens ({longest} in the {where}, {max_new_tokens} in "
            f"the completion). With truncate_prompt_tokens -1 the model keeps room for at most "
            f"{window // 2} new tokens when it cuts the {where}: ask for fewer.",
            param=where,
        )
    return max_new_tokens
