"""Copy-paste examples for a running gateway: `make up` prints them, a test runs them.

The `default` model is small and trained on Python's documentation and on customer-service
dialogues: it answers a customer's turn sensibly and writes no fluent free prose. So both
examples ask it what it was trained to answer: the completion sends a user turn in the chat
template (`tokenpulse/chatformat.py`) and reads the assistant's answer, and the SDK asks the
same through chat completions.
"""

from __future__ import annotations

import json
import shlex

from tokenpulse.chatformat import ROLES, render
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

DEFAULT_QUESTION = "Hi, I ordered a keyboard last Friday and it arrived broken."
DEFAULT_PROMPT = render([(ROLES["user"], DEFAULT_QUESTION)])
MAX_TOKENS = 32


def curl_snippet(
    url: str, key: str, model: str = DEFAULT_MODEL_NAME, prompt: str = DEFAULT_PROMPT
) -> str:
    """A curl command calling the OpenAI-compatible completions endpoint."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": MAX_TOKENS})
    return (
        f"curl -sS {shlex.quote(url.rstrip('/') + '/v1/completions')} \\\n"
        f"  -H {shlex.quote('Authorization: Bearer ' + key)} \\\n"
        f"  -H 'Content-Type: application/json' \\\n"
        f"  -d {shlex.quote(body)}"
    )


def openai_snippet(
    url: str, key: str, model: str = DEFAULT_MODEL_NAME, question: str = DEFAULT_QUESTION
) -> str:
    """A Python snippet using the `openai` SDK's chat completions."""
    messages = [{"role": "user", "content": question}]
    return (
        "from openai import OpenAI\n"
        f"client = OpenAI(base_url={url.rstrip('/') + '/v1'!r}, api_key={key!r})\n"
        f"done = client.chat.completions.create(model={model!r}, messages={messages!r}, "
        f"max_tokens={MAX_TOKENS})\n"
        "print(done.choices[0].message.content)"
    )
