"""`POST /v1/chat/completions`: OpenAI chat on a text-completion model, by a documented template.

The model continues text, so the messages are flattened into one prompt (CHAT_TEMPLATE) and the
turn ends where the model starts the next role line (TEMPLATE_STOPS, applied like `stop`). The
context window is checked on the flattened prompt, with the same 400 and
`truncate_prompt_tokens` as `/v1/completions`; without max_tokens the answer may use the rest
of the window, as in vLLM. Fields the model cannot honour follow `serving.gateway.fields`.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from serving.gateway.errors import BadRequest
from serving.gateway.fields import MESSAGE_INERT, check_inert, refusal
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
from serving.gateway.native import signals, timings
from serving.gateway.openai_compat import (
    TOP_K_DESCRIPTION,
    CompletionUsage,
    Extension,
    stops,
    top_k,
    usage,
)
from serving.gateway.sse import Progress
from serving.gateway.streaming import Piece
from tokenpulse.samples import RequestStats

ROLES = {"system": "System", "developer": "System", "user": "User", "assistant": "Assistant"}
NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
CHAT_TEMPLATE = (
    "Each message becomes one line `<Role>: <content>` in order: Role is System (for system "
    "and developer), User or Assistant, followed by ` (<name>)` when the message has a name; "
    'list content is its text parts joined with "\n". The prompt ends with `Assistant: ` for '
    "the model to continue, and the answer ends where the model starts another role line "
    "(`\nSystem:`, `\nUser:`, `\nAssistant:`, or with a name, `\nUser (`...): "
    'finish_reason "stop". A line of content that starts like a role line (any case) is '
    "indented by one space, so content cannot forge a turn. "
    'E.g. [system "Be brief.", user "Hi"] -> "System: Be brief.\nUser: Hi\nAssistant: ".'
)
TEMPLATE_STOPS = tuple(
    f"\n{role}{sep}" for role in ("System", "User", "Assistant") for sep in (":", " (")
)
# a content line the model could read as a turn: a role word at the start, then `:` or ` (`
_ROLE_LINE = re.compile(r"^(system|developer|user|assistant)(:| \()", re.IGNORECASE | re.MULTILINE)


class ChatRequest(BaseModel):
    """OpenAI `chat.completions.create` parameters the model honours; any other field is checked
    by the one rule of `serving.gateway.fields` (off values accepted, the rest a 400 naming it)."""

    model_config = ConfigDict(strict=True, extra="allow")

    model: str = Field(min_length=1, max_length=128)
    messages: list[dict[str, Any]] = Field(
        min_length=1, description=f"system, developer, user and assistant messages. {CHAT_TEMPLATE}"
    )
    max_tokens: PositiveInt | None = Field(
        None,
        description="Default: the rest of the model's window after the prompt (vLLM's default), "
        "up to the deployment's cap; prompt tokens + max_tokens must fit the window.",
    )
    max_completion_tokens: PositiveInt | None = Field(None, description="Same as max_tokens.")
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: TopK | None = Field(None, description=TOP_K_DESCRIPTION)
    seed: SeedInt | None = None
    stop: str | list[str] | None = None
    user: str | None = Field(None, max_length=256)
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
            if not isinstance(part.get("text"), str) or set(part) - {"type", "text"}:
                raise BadRequest(
                    f"messages[{i}].content: a text part is {{type: text, text: <string>}}",
                    param="messages",
                )
            parts.append(part["text"])
        return "\n".join(parts)  # as vLLM joins text parts
    raise BadRequest(
        f"messages[{i}].content must be a string or a list of text parts", param="messages"
    )


def _check_fields(message: dict[str, Any], i: int) -> None:
    """A message's fields: role, content and name, plus what the SDK dumps with a reply."""
    for name in sorted(set(message) - {"role", "content", "name"}):
        rule = MESSAGE_INERT.get(name)
        if rule is None:
            raise BadRequest(f"messages[{i}]: unsupported field {name!r}", param="messages")
        if not rule.accepts(message[name]):
            raise BadRequest(
                f"messages[{i}].{refusal(name, message[name], rule)}", param="messages"
            )
    who = message.get("name")
    if who is not None and not (isinstance(who, str) and re.match(NAME_PATTERN, who)):
        raise BadRequest(
            f"messages[{i}].name must be 1 to 64 letters, digits, _ or -", param="messages"
        )


def _escape(content: str) -> str:
    """Content as it goes into its line: newlines normalised, role-like lines indented."""
    content = content.replace("\r\n", "\n").replace("\r", "\n")
    return _ROLE_LINE.sub(lambda m: " " + m.group(0), content)


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
                f"messages[{i}].role must be system, developer, user or assistant, got {role!r}",
                param="messages",
            )
        if message.get("tool_calls") or message.get("function_call"):
            raise BadRequest(
                f"messages[{i}]: tool calls are not supported: this model cannot call tools",
                param="messages",
            )
        _check_fields(message, i)
        who = ROLES[role] + (f" ({message['name']})" if message.get("name") else "")
        lines.append(f"{who}: {_escape(_content(message, i))}")
    return "\n".join([*lines, "Assistant: "])


def parse(raw: bytes, limits: Limits) -> Job:
    """Validate a chat body and flatten its messages into one prompt."""
    req: ChatRequest = validate_body(ChatRequest, raw, BadRequest)
    check_inert(req.model_extra or {})
    prompt = flatten(req.messages)
    check_prompts([prompt], limits, BadRequest)
    asked = req.max_completion_tokens or req.max_tokens
    param = "max_completion_tokens" if req.max_completion_tokens else "max_tokens"
    if asked is not None:
        check_max_new_tokens(asked, limits, param, BadRequest)
    options = stream_options(req.stream, req.stream_options, BadRequest)
    prompts, max_tokens = fit_window(
        [prompt], asked, limits, req.truncate_prompt_tokens, where="messages"
    )
    return Job(
        model=req.model,
        prompts=prompts,
        max_new_tokens=max_tokens,
        temperature=1.0 if req.temperature is None else req.temperature,
        top_k=top_k(req.top_k),
        top_p=1.0 if req.top_p is None else req.top_p,
        seed=req.seed if req.seed is not None else secrets.randbits(31),
        user=req.user,
        stop=stops(req.stop) + TEMPLATE_STOPS,
        truncate_prompt_tokens=req.truncate_prompt_tokens,
        stream=bool(req.stream),
        include_usage=options.include_usage,
        continuous_usage=options.continuous_usage_stats,
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
    """The events of one streamed chat completion: the role, the content, then the usage; with
    vLLM's `stream_options.continuous_usage_stats`, each event carries the usage so far."""

    def __init__(self, job: Job, stats: RequestStats, progress: Progress | None = None) -> None:
        self.job, self.stats = job, stats
        self.created = int(time.time())
        self._progress = progress if job.continuous_usage else None

    def _so_far(self) -> CompletionUsage | None:
        return usage(self.stats, self._progress) if self._progress else None

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
        if self._progress:  # the role chunk: the prompt, nothing generated yet (as vLLM)
            prompt_tokens = self._progress()[0]
            nothing = CompletionUsage.model_construct(
                prompt_tokens=prompt_tokens, completion_tokens=0, total_tokens=prompt_tokens
            )
            return [self._chunk([choice], nothing)]
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
                self._so_far(),
            )
            for p in pieces
        ]

    def end(self) -> list[BaseModel]:
        """The usage event, when asked for."""
        return [self._chunk([], usage(self.stats))] if self.job.include_usage else []
