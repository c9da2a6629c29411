"""What both endpoints turn a request into: model rows for one upstream call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from annotated_types import Ge, Le
from pydantic import BaseModel, BeforeValidator, ValidationError

from serving.gateway.errors import BadRequest, GatewayError, PayloadTooLarge

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
# vLLM's parameter: -1 lets the model keep the end of the prompt that fits, k >= 1 keeps the last k
TruncateTokens = Literal[-1] | PositiveInt
TRUNCATE_DESCRIPTION = (
    "Unset: a prompt longer than the model's window is refused with 400. "
    "-1: the model keeps the end of the prompt that fits. k: keep the prompt's last k tokens."
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
    truncate_prompt_tokens: int | None = None
    stream: bool = False  # answer with server-sent events, chunk by chunk
    include_usage: bool = False  # streams: a last event with the usage (stream_options)

    @property
    def token_budget(self) -> int:
        """Tokens to reserve against the key's token limit."""
        return self.max_new_tokens * len(self.prompts)

    def rows(self) -> list[dict[str, Any]]:
        """REST `instances`, one per prompt, per the serving_default contract."""
        return [
            {
                "prompt": p,
                "max_new_tokens": self.max_new_tokens,
                "temperature": float(self.temperature),
                "top_k": self.top_k,
                "top_p": float(self.top_p),
                "seed": self.seed,
            }
            for p in self.prompts
        ]

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


def include_usage(
    stream: bool | None, options: dict[str, Any] | None, invalid: type[GatewayError]
) -> bool:
    """`stream_options` as OpenAI takes it: only with `stream`, only `include_usage` (a bool)."""
    if options is None:
        return False
    if not stream:
        raise invalid("stream_options is only allowed when stream is true", param="stream_options")
    unknown = set(options) - {"include_usage"}
    if unknown:
        name = sorted(unknown)[0]
        raise invalid(f"stream_options: unknown option {name!r}", param="stream_options")
    value = options.get("include_usage", False)
    if not isinstance(value, bool):
        raise invalid("stream_options.include_usage must be a boolean", param="stream_options")
    return value


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
    return prompt if len(raw) <= tokens else raw[-tokens:].decode("utf-8", "ignore")


def fit_prompts(
    prompts: list[str], max_new_tokens: int, limits: Limits, truncate: int | None
) -> list[str]:
    """Apply `truncate_prompt_tokens`, then refuse a prompt the model's window cannot hold.

    Tokens are UTF-8 bytes, and the model adds a start token. It keeps room for
    min(max_new_tokens, window / 2) new tokens and drops the start of a longer prompt (the rule
    of `serving/model/generate.py:_budgets`); that drop happens only when the client asked.
    """
    window = limits.context_window_tokens
    room = min(max(max_new_tokens, 1), window // 2)
    fit = window - room - 1
    if truncate is not None and truncate > 0:
        prompts = [_keep_last(p, truncate) for p in prompts]
    if truncate == -1:
        return prompts
    for p in prompts:
        tokens = len(p.encode("utf-8"))
        if tokens > fit:
            raise BadRequest(
                f"This model's maximum context length is {window} tokens. However, your prompt "
                f"has {tokens} tokens, and with {room} kept for the output (and one start token) "
                f"at most {fit} fit. Please reduce the length of the prompt or of the output, "
                "or set truncate_prompt_tokens (-1 keeps the end of the prompt that fits).",
                param="prompt",
            )
    return prompts
