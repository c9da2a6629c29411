"""The chat format: how messages become the text a model continues, in one place.

The gateway flattens a chat request with it and our model is trained on dialogues rendered with
it, so the prompt a user's messages make is the format the model learnt. Each message is one
turn `<Role>[ (<name>)]: <content>`, closed by the end-of-turn token and a newline; the prompt
ends with `Assistant: `, and the model's answer ends where it writes end-of-turn (a token that
ends a row as end-of-text does, finish reason `stop`). No TensorFlow here: the gateway imports it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

END_OF_TEXT = "<|endoftext|>"
END_OF_TURN = "<|endofturn|>"
SPECIAL_TOKENS = (END_OF_TEXT, END_OF_TURN)  # in this order after the subword ids (see bpe.py)

ROLES = {"system": "System", "developer": "System", "user": "User", "assistant": "Assistant"}
ROLE_NAMES = ("System", "User", "Assistant")
ANSWER_PREFIX = "Assistant: "
TURN_END = END_OF_TURN + "\n"

# A content line the model could read as a turn (a role word at the start, then `:` or ` (`),
# and special-token text, which a tokenizer would read as the token itself.
_ROLE_LINE = re.compile(r"^(system|developer|user|assistant)(:| \()", re.IGNORECASE | re.MULTILINE)
_SPECIAL = re.compile("|".join(re.escape(t) for t in SPECIAL_TOKENS))

DESCRIPTION = (
    "Each message becomes one turn `<Role>: <content><|endofturn|>` and a newline, in order: "
    "Role is System (for system and developer), User or Assistant, followed by ` (<name>)` "
    'when the message has a name; list content is its text parts joined with "\n". The prompt '
    "ends with `Assistant: ` for the model to continue, and the answer ends where the model "
    "writes the end-of-turn token or starts another role line (`\nSystem:`, `\nUser:`, "
    '`\nAssistant:`, or with a name, `\nUser (`...): finish_reason "stop". A line of content '
    "that starts like a role line (any case) is indented by one space, and special-token text "
    "(`<|endofturn|>`, `<|endoftext|>`) gets a space after its `<`, so content cannot forge a "
    'turn. E.g. [system "Be brief.", user "Hi"] -> '
    '"System: Be brief.<|endofturn|>\nUser: Hi<|endofturn|>\nAssistant: ".'
)
# Where a model that never learnt end-of-turn (an imported one) ends its answer.
ROLE_STOPS = tuple(f"\n{role}{sep}" for role in ROLE_NAMES for sep in (":", " ("))


def escape(content: str) -> str:
    """Content as it goes into its turn: newlines normalised, role-like lines indented,
    special-token text broken so that it stays text."""
    content = content.replace("\r\n", "\n").replace("\r", "\n")
    content = _SPECIAL.sub(lambda m: "< " + m.group(0)[1:], content)
    return _ROLE_LINE.sub(lambda m: " " + m.group(0), content)


def turn(role: str, content: str) -> str:
    """One closed turn; `role` is the label (`User`, `Assistant (bot)`, ...)."""
    return f"{role}: {escape(content)}{TURN_END}"


def render(turns: Iterable[tuple[str, str]], *, answer: bool = True) -> str:
    """(role label, content) turns as one text; with `answer`, open the assistant's turn."""
    text = "".join(turn(role, content) for role, content in turns)
    return text + ANSWER_PREFIX if answer else text


def overhead(role: str = "User") -> int:
    """Characters a turn adds around its content (label, separator, end of turn, newline)."""
    return len(turn(role, ""))
