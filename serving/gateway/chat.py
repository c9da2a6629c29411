"""`POST /v1/chat/completions`: OpenAI chat on a text-completion model, by a documented template.

The model continues text, so the messages are flattened into one prompt by the chat format our
model is trained on (`tokenpulse.chatformat`), and the turn ends at the model's end-of-turn
token or where it starts the next role line (TEMPLATE_STOPS, applied like `stop`). The
context window is checked on the flattened prompt, with the same 400 and
`truncate_prompt_tokens` as `/v1/completions`; without max_tokens the answer may use the rest
of the window, as in vLLM. Fields the model cannot honour follow `serving.gateway.fields`.
"""

from __future__ import annotations

import re
import time
from typing import Any, Literal

from pydantic import BaseModel, Field

from serving.gateway.errors import BadRequest, openai_body
from serving.gateway.fields import MESSAGE_INERT, check_inert, refusal
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
from tokenpulse import chatformat
from tokenpulse.samples import RequestStats

NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
CHAT_TEMPLATE = chatformat.DESCRIPTION
TEMPLATE_STOPS = chatformat.ROLE_STOPS


class ChatRequest(OpenAIRequest):
    """OpenAI `chat.completions.create` parameters the model honours (and `OpenAIRequest`'s)."""

    messages: list[dict[str, Any]] = Field(
        min_length=1, description=f"system, developer, user and assistant messages. {CHAT_TEMPLATE}"
    )
    max_tokens: PositiveInt | None = Field(
        None,
        description="Default: the rest of the model's window after the prompt (vLLM's default), "
        "up to the deployment's cap; prompt tokens + max_tokens must fit the window.",
    )
    max_completion_tokens: PositiveInt | None = Field(None, description="Same as max_tokens.")


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


def flatten(messages: list[dict[str, Any]]) -> str:
    """The prompt the model continues (see CHAT_TEMPLATE); 400 on roles and tool calls."""
    turns = []
    for i, message in enumerate(messages):
        role = message.get("role")
        if role in ("tool", "function"):
            raise BadRequest(
                f"messages[{i}]: {role} messages are not supported: this model cannot call tools",
                param="messages",
            )
        if role not in chatformat.ROLES:
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
        who = chatformat.ROLES[role] + (f" ({message['name']})" if message.get("name") else "")
        turns.append((who, _content(message, i)))
    return chatformat.render(turns)


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
    prompts, max_tokens, recount = fit_or_recount(
        [prompt], asked, limits, req.truncate_prompt_tokens, where="messages"
    )
    return openai_job(req, prompts, max_tokens, options, TEMPLATE_STOPS, recount)


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
        system_fingerprint=fingerprint(stats),
        choices=[
            ChatChoice.model_construct(
                index=0,
                message=ChatMessage.model_construct(role="assistant", content=texts[0]),
                finish_reason=out.finish_reason,
            )
        ],
        usage=usage(stats),
        tokenpulse=extension(stats),
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


class ChatCompletionChunk(OpenAIChunk):
    """One `chat.completion.chunk` event of a stream."""

    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    choices: list[ChunkChoice]


class ChatStream(ChunkStream):
    """The events of one streamed chat completion: the role, the content, then the usage."""

    event = ChatCompletionChunk
    id_prefix = "chatcmpl-"

    def choice(self, piece: Piece) -> BaseModel:
        """The message's new content; its finish reason on its last piece."""
        delta = Delta.model_construct(role=None, content=piece.text)
        return ChunkChoice.model_construct(
            index=piece.index, delta=delta, finish_reason=piece.finish_reason
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
            return [self.chunk([choice], nothing)]
        return [self.chunk([choice], None)]


ENDPOINT = Endpoint("chat", parse, respond, ChatStream, openai_body)
