"""Copy-paste examples for a running gateway: `make up` prints them, a test runs them."""

from __future__ import annotations

import json
import shlex

from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

DEFAULT_PROMPT = "Once upon a time"


def curl_snippet(
    url: str, key: str, model: str = DEFAULT_MODEL_NAME, prompt: str = DEFAULT_PROMPT
) -> str:
    """A curl command calling the OpenAI-compatible endpoint."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": 32})
    return (
        f"curl -sS {shlex.quote(url.rstrip('/') + '/v1/completions')} \\\n"
        f"  -H {shlex.quote('Authorization: Bearer ' + key)} \\\n"
        f"  -H 'Content-Type: application/json' \\\n"
        f"  -d {shlex.quote(body)}"
    )


def openai_snippet(
    url: str, key: str, model: str = DEFAULT_MODEL_NAME, prompt: str = DEFAULT_PROMPT
) -> str:
    """A Python snippet using the `openai` SDK."""
    return (
        "from openai import OpenAI\n"
        f"client = OpenAI(base_url={url.rstrip('/') + '/v1'!r}, api_key={key!r})\n"
        f"done = client.completions.create(model={model!r}, prompt={prompt!r}, max_tokens=32)\n"
        "print(done.choices[0].text)"
    )
