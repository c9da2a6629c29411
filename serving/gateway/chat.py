"""`POST /v1/chat/completions`: OpenAI chat on a text-completion model, by a documented template.

The model continues text, so the messages are flattened into one prompt (CHAT_TEMPLATE): each
message becomes a line `<Role>: <content>` (System, User, Assistant), and the prompt ends with
`Assistant:` for the model to continue. Content is a string or a list of text parts (joined).
Roles other than system, user and assistant, tool calls, tools and functions get a clear 400.
The context window is checked on the flattened prompt, with the same 400 and
`truncate_prompt_tokens` as `/v1/completions`.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from serving.gateway.errors import BadRequest
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
    fit_prompts,
    include_usage,
    validate_body,
)
from serving.gateway.native import signals, timings
from serving.gateway.openai_compat import CompletionUsage, Extension, stops, usage
from serving.gateway.streaming import Piece
from tokenpulse.samples import RequestStats

ROLES = {"system": "System", "user": "User", "assistant": "Assistant"}
CHAT_TEMPLATE = (
    "Each message becomes one line `<Role>: <content>` in order (Role is System, User or "
    "Assistant; list content is its text parts joined), and the prompt ends with `Assistant:`; "
    'e.g. [system "Be brief.", user "Hi"] -> "System: Be brief.\\nUser: Hi\\nAssistant:".'
)
# refused by name, so the client learns why rather than meeting "extra fields not permitted"
_UNSUPPORTED = {
    "tools": "tools are not supported: this model cannot call tools",
    "tool_choice": "tool_choice is not supported: this model cannot call tools",
    "functions": "functions are not supported: this model cannot call tools",
    "function_call": "function_call is not supported: this model cannot call tools",
    "parallel_tool_calls": "parallel_tool_calls is not supported: this model cannot call tools",
    "response_format": "response_format is not supported",
    "logprobs": "logprobs is not supported",
    "top_logprobs": "top_logprobs is not supported",
    "presence_penalty": "presence_penalty is not supported",
    "frequency_penalty": "frequency_penalty is not supported",
    "logit_bias": "logit_bias is not supported",
    "audio": "audio is not supported",
    "modalities": "modalities are not supported",
}


class ChatRequest(BaseModel):
    """OpenAI `chat.completions.create` parameters (tools and the like are refused clearly)."""

    model_config = ConfigDict(strict=True, extra="allow")

    model: str = Field(min_length=1, max_length=128)
    messages: list[dict[str, Any]] = Field(
        min_length=1, description=f"system, user and assistant messages. {CHAT_TEMPLATE}"
    )
    max_tokens: PositiveInt | None = None
    max_completion_tokens: PositiveInt | None = None
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: SeedInt | None = None
    stop: str | list[str] | None = None
    user: str | None = Field(None, max_length=256)
    n: JsonInt | None = None
    stream: bool | None = None
    stream_options: dict[str, Any] | None = None
    truncate_prompt_tokens: TruncateTokens | None = Field(None, description=TRUNCATE_DESCRIPTION)


def _content(message: dict[str, Any], i: int) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise BadRequest(
                    f"messages[{i}].content: only text parts are supported", param="messages"
                )
            if not isinstance(part.get("text"), str):
                raise BadRequest(f"messages[{i}].content: a text part needs text", param="messages")
            parts.append(part["text"])
        return "".join(parts)
    raise BadRequest(
        f"messages[{i}].content must be a string or a list of text parts", param="messages"
    )


def flatten(messages: list[dict[str, Any]]) -> str:
    """The prompt the model continues (see CHAT_TEMPLATE); 400 on roles and tool calls."""
    lines = []
    for i, message in enumerate(messages):
        role = message.get("role")
        if role in ("tool", "function"):
            raise BadRequest(
                f"messages[{i}]: {role} messages are not supported: this model cannot call tools",
                param="messages",
            )
        if role not in ROLES:
            raise BadRequest(
                f"messages[{i}].role must be system, user or assistant, got {role!r}",
                param="messages",
            )
        if message.get("tool_calls") or message.get("function_call"):
            raise BadRequest(
                f"messages[{i}]: tool calls are not supported: this model cannot call tools",
                param="messages",
            )
        unknown = set(message) - {"role", "content", "name"}
        if unknown:
            raise BadRequest(
                f"messages[{i}]: unsupported field {sorted(unknown)[0]!r}", param="messages"
            )
        lines.append(f"{ROLES[role]}: {_content(message, i)}")
    return "\n".join([*lines, "Assistant:"])


def parse(raw: bytes, limits: Limits) -> Job:
    """Validate a chat body and flatten its messages into one prompt."""
    req: ChatRequest = validate_body(ChatRequest, raw, BadRequest)
    for name in sorted(req.model_extra or {}):
        message = _UNSUPPORTED.get(name, f"{name}: extra inputs are not permitted")
        raise BadRequest(message, param=name)
    if req.n not in (None, 1):
        raise BadRequest("n must be 1: one completion per request is supported", param="n")
    prompt = flatten(req.messages)
    check_prompts([prompt], limits, BadRequest)
    max_tokens = req.max_completion_tokens or req.max_tokens or limits.default_max_new_tokens
    param = "max_completion_tokens" if req.max_completion_tokens else "max_tokens"
    check_max_new_tokens(max_tokens, limits, param, BadRequest)
    return Job(
        model=req.model,
        prompts=fit_prompts([prompt], max_tokens, limits, req.truncate_prompt_tokens),
        max_new_tokens=max_tokens,
        temperature=1.0 if req.temperature is None else req.temperature,
        top_k=0,
        top_p=1.0 if req.top_p is None else req.top_p,
        seed=req.seed if req.seed is not None else secrets.randbits(31),
        user=req.user,
        stop=stops(req.stop),
        truncate_prompt_tokens=req.truncate_prompt_tokens,
        stream=bool(req.stream),
        include_usage=include_usage(req.stream, req.stream_options, BadRequest),
    )


class ChatMessage(BaseModel):
    """The assistant's answer."""

    role: Literal["assistant"] = "assistant"
    content: str


class ChatChoice(BaseModel):
    """One chat completion."""

    index: int
    message: ChatMessage
    finish_reason: str
    logprobs: None = None


class ChatCompletion(BaseModel):
    """OpenAI `chat.completion` object plus the `tokenpulse` extension."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    system_fingerprint: str
    choices: list[ChatChoice]
    usage: CompletionUsage
    tokenpulse: Extension


def respond(job: Job, texts: list[str], stats: RequestStats) -> ChatCompletion:
    """The unary chat answer."""
    out = stats.outputs[0]
    return ChatCompletion.model_construct(
        id=f"chatcmpl-{stats.request_id}",
        object="chat.completion",
        created=int(time.time()),
        model=stats.model,
        system_fingerprint=f"{stats.model}:v{stats.version}",
        choices=[
            ChatChoice.model_construct(
                index=0,
                message=ChatMessage.model_construct(role="assistant", content=texts[0]),
                finish_reason=out.finish_reason,
            )
        ],
        usage=usage(stats),
        tokenpulse=Extension.model_construct(
            version=stats.version,
            version_label=stats.version_label or None,
            signals=[signals(o) for o in stats.outputs],
            timings=timings(stats),
        ),
    )


class Delta(BaseModel):
    """What a chunk adds to the message: the role first, then content."""

    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    """The message's new content in a stream; `finish_reason` on its last chunk."""

    index: int
    delta: Delta
    finish_reason: str | None
    logprobs: None = None


class ChatCompletionChunk(BaseModel):
    """One `chat.completion.chunk` event of a stream."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    system_fingerprint: str
    choices: list[ChunkChoice]
    usage: CompletionUsage | None = None


class ChatStream:
    """The events of one streamed chat completion: the role, the content, then the usage."""

    def __init__(self, job: Job, stats: RequestStats) -> None:
        self.job, self.stats = job, stats
        self.created = int(time.time())

    def _chunk(self, choices: list[ChunkChoice], usage: CompletionUsage | None) -> BaseModel:
        s = self.stats
        return ChatCompletionChunk.model_construct(
            id=f"chatcmpl-{s.request_id}",
            object="chat.completion.chunk",
            created=self.created,
            model=s.model,
            system_fingerprint=f"{s.model}:v{s.version}",
            choices=choices,
            usage=usage,
        )

    def begin(self) -> list[BaseModel]:
        """The role, before any content (as OpenAI sends it)."""
        delta = Delta.model_construct(role="assistant", content="")
        choice = ChunkChoice.model_construct(index=0, delta=delta, finish_reason=None)
        return [self._chunk([choice], None)]

    def pieces(self, pieces: list[Piece]) -> list[BaseModel]:
        """One event per piece of content."""
        return [
            self._chunk(
                [
                    ChunkChoice.model_construct(
                        index=p.index,
                        delta=Delta.model_construct(role=None, content=p.text),
                        finish_reason=p.finish_reason,
                    )
                ],
                None,
            )
            for p in pieces
        ]

    def end(self) -> list[BaseModel]:
        """The usage event, when asked for."""
        return [self._chunk([], usage(self.stats))] if self.job.include_usage else []
