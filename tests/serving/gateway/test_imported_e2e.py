"""An imported keras_hub GPT-2 preset behind the real model server and the real gateway: the
OpenAI endpoints answer with the export's own greedy output, streamed equal to unary (what
`tokenpulse up --model-preset-dir` serves; the export against keras_hub's own `generate`:
tests/serving/model/hub/test_importer.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from serving.gateway.chat import TEMPLATE_STOPS, flatten
from tests.support.gateway import GatewayProcess, stable_behind_gateway
from tests.support.hub import CONTEXT, cached_gpt2_import
from tests.support.modelserver import ModelServerProcess
from tokenpulse.tfserving.signature import default_row, stop_slots

pytestmark = pytest.mark.slow
PROMPT = "The assert statement says"  # the random model writes a few tokens before stopping
NEW = 16
CHUNK = 4


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ModelServerProcess, GatewayProcess, openai.OpenAI]]:
    """Model server with the import as version 1 (stable), a gateway streaming in chunks of 4."""
    tmp = tmp_path_factory.mktemp("imported-e2e")
    with stable_behind_gateway(
        cached_gpt2_import(), tmp, max_new_tokens_limit=48, context_window_tokens=CONTEXT,
        stream_chunk_tokens=CHUNK, stream_first_chunk_tokens=CHUNK,
    ) as (server, gw, key):  # fmt: skip
        yield server, gw, openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0)


def direct(server: ModelServerProcess, prompt: str, stops: tuple[str, ...] = ()) -> str:
    """The export's own greedy text, from the model server's predict (no gateway)."""
    row = default_row(prompt, NEW) | {"stop": stop_slots(stops)}
    resp = httpx.post(
        f"{server.rest_url}/v1/models/gen/versions/1:predict",
        json={"signature_name": "serving_default", "instances": [row]},
        timeout=60,
    )
    assert resp.status_code == 200, resp.text
    return str(resp.json()["predictions"][0]["text"])


def _streamed(create: Any, **kw: Any) -> tuple[str, int]:
    """The text of a stream and how many chunks carried some of it."""
    pieces = []
    for chunk in create(stream=True, **kw):
        if chunk.choices:
            choice = chunk.choices[0]
            piece = choice.delta.content if hasattr(choice, "delta") else choice.text
            pieces += [piece] if piece else []
    return "".join(pieces), len(pieces)


def test_a_completion_is_the_exports_greedy_output_unary_and_streamed(stack) -> None:
    server, _, client = stack
    kw: dict[str, Any] = {"model": "gen", "prompt": PROMPT, "max_tokens": NEW, "temperature": 0}
    unary = client.completions.create(seed=3, **kw).choices[0]
    expected = direct(server, PROMPT)
    assert len(expected) > 4 and unary.text == expected
    text, chunks = _streamed(client.completions.create, seed=3, **kw)
    assert text == unary.text and chunks > 1  # the same text, arrived in chunks of 4 tokens


def test_a_chat_answer_is_the_exports_greedy_output_unary_and_streamed(stack) -> None:
    server, _, client = stack
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": PROMPT}]
    kw: dict[str, Any] = {"model": "gen", "messages": messages, "max_tokens": NEW}
    unary = client.chat.completions.create(temperature=0, seed=5, **kw).choices[0]
    assert unary.message.content == direct(server, flatten(messages), TEMPLATE_STOPS)
    assert unary.message.content and unary.finish_reason in ("stop", "length")
    text, _ = _streamed(client.chat.completions.create, temperature=0, seed=5, **kw)
    assert text == unary.message.content
