"""The one rule for OpenAI request fields the model cannot honour: "off" is not an error.

OpenAI's and vLLM's clients send fields whose value means "no change" (`presence_penalty: 0`,
`tools: null`, `n: 1`, vLLM's `min_p: 0`). Both OpenAI endpoints accept such a field when its
value is one of its off values; a value that would change the result gets a 400 naming the
field, and a field nobody defines gets OpenAI's "unrecognized request argument". No-op fields
(OpenAI's `metadata`, `store`, `user`, ...) change nothing whatever their value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from serving.gateway.errors import BadRequest

_TOOLS = "this model cannot call tools"


@dataclass(frozen=True)
class Inert:
    """A field accepted only with a value that changes nothing (`off`), or with any (`any`)."""

    reason: str
    off: tuple[Any, ...] = (None,)
    any: bool = False

    def accepts(self, value: Any) -> bool:
        """Whether `value` leaves the result as it would be without the field."""
        return self.any or any(_same(value, o) for o in self.off)

    def schema(self) -> dict[str, Any]:
        """The JSON schema of what is accepted (for /openapi.json)."""
        if self.any:
            return {"description": f"Accepted, changes nothing: {self.reason}."}
        return {
            "enum": list(self.off),
            "description": f"Accepted only with a value that changes nothing: {self.reason}.",
        }


def _same(value: Any, off: Any) -> bool:
    # JSON equality: 0 and 0.0 are one number; false is not 0, and null is not {}
    if isinstance(off, bool) or isinstance(value, bool) or off is None or value is None:
        return value is off
    if isinstance(off, int | float):
        return isinstance(value, int | float) and value == off
    return type(value) is type(off) and value == off


_SPECIAL = "the byte model's only special token, end-of-text, decodes to nothing"
_NO_OP = "OpenAI uses it for storage, billing or abuse tracking, not for the text"
# field -> what is accepted; one table for /v1/completions and /v1/chat/completions
INERT: dict[str, Inert] = {
    "n": Inert("one completion per prompt is generated", (None, 1)),
    "best_of": Inert("one completion per prompt is generated", (None, 1)),
    "echo": Inert("the prompt is not echoed", (None, False)),
    "suffix": Inert("this model does not insert text", (None, "")),
    "logprobs": Inert("the model server returns no per-token log probabilities", (None, False)),
    "top_logprobs": Inert("the model server returns no per-token log probabilities", (None, 0)),
    "prompt_logprobs": Inert("the model server returns no per-token log probabilities"),
    "presence_penalty": Inert("the model has no presence penalty", (None, 0)),
    "frequency_penalty": Inert("the model has no frequency penalty", (None, 0)),
    "repetition_penalty": Inert("the model has no repetition penalty", (None, 1)),
    "min_p": Inert("the model's sampler has no min_p cut", (None, 0)),
    "logit_bias": Inert("the model's sampler takes no logit bias", (None, {})),
    "tools": Inert(_TOOLS, (None, [])),
    "tool_choice": Inert(_TOOLS, (None, "none")),
    "functions": Inert(_TOOLS, (None, [])),
    "function_call": Inert(_TOOLS, (None, "none")),
    "parallel_tool_calls": Inert(f"{_TOOLS}, so there are no calls to run in parallel", any=True),
    "response_format": Inert("the model writes plain text only", (None, {"type": "text"})),
    "audio": Inert("the model writes text only"),
    "modalities": Inert("the model writes text only", (None, ["text"])),
    "prediction": Inert("the model takes no predicted output"),
    "web_search_options": Inert("the model cannot search the web"),
    "reasoning_effort": Inert("the model does not reason in a separate channel"),
    "min_tokens": Inert("the model cannot be kept from stopping early", (None, 0)),
    "stop_token_ids": Inert("stop sequences are text (`stop`)", (None, [])),
    "include_stop_str_in_output": Inert("the stop sequence is never sent", (None, False)),
    "use_beam_search": Inert("the model samples, it does not beam-search", (None, False)),
    "length_penalty": Inert("the model does not beam-search", (None, 1)),
    "skip_special_tokens": Inert(_SPECIAL, any=True),
    "spaces_between_special_tokens": Inert(_SPECIAL, any=True),
    "add_generation_prompt": Inert("chat always ends with the `Assistant:` line", (None, True)),
    "continue_final_message": Inert("chat always starts a new assistant line", (None, False)),
    "guided_json": Inert("the model cannot be constrained to a grammar"),
    "guided_regex": Inert("the model cannot be constrained to a grammar"),
    "guided_choice": Inert("the model cannot be constrained to a grammar"),
    "guided_grammar": Inert("the model cannot be constrained to a grammar"),
    "structured_outputs": Inert("the model cannot be constrained to a grammar"),
    "priority": Inert("requests are served in arrival order", (None, 0)),
    "metadata": Inert(_NO_OP, any=True),
    "store": Inert(_NO_OP, any=True),
    "service_tier": Inert(_NO_OP, any=True),
    "prompt_cache_key": Inert(_NO_OP, any=True),
    "prompt_cache_retention": Inert(_NO_OP, any=True),
    "safety_identifier": Inert(_NO_OP, any=True),
}
# fields of an assistant message as the SDK dumps a reply (`message.model_dump()`)
MESSAGE_INERT: dict[str, Inert] = {
    "refusal": Inert("a replayed refusal carries no text", (None,)),
    "annotations": Inert("the model makes no annotations", (None, [])),
    "audio": Inert("the model writes text only"),
    "function_call": Inert(_TOOLS),
    "tool_calls": Inert(_TOOLS, (None, [])),
    "reasoning_content": Inert("the model does not reason in a separate channel"),
}


def check_inert(extra: dict[str, Any]) -> None:
    """400 for the first field (by name) that is unknown or set to a value that changes the
    result; every off value and no-op field passes."""
    for name in sorted(extra):
        value = extra[name]
        rule = INERT.get(name)
        if rule is None:
            raise BadRequest(f"Unrecognized request argument supplied: {name}", param=name)
        if not rule.accepts(value):
            raise BadRequest(refusal(name, value, rule), param=name)


def refusal(name: str, value: Any, rule: Inert) -> str:
    """Why a value is refused, and what would be accepted."""
    accepted = ", ".join(json.dumps(o) for o in rule.off)
    return (
        f"{name}: {json.dumps(value)[:60]} is not supported: {rule.reason} "
        f"(accepted: {accepted}, or leave it out)"
    )
