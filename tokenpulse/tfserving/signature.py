"""The `serving_default` contract of every exported version, importable without TensorFlow.

The model server, gateway, exporter and tests all speak this contract. Every input carries a
leading batch dimension, because TF Serving's batcher concatenates requests along dim 0.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenpulse.tfserving.predict import DEFAULT_SIGNATURE

SIGNATURE_NAME = DEFAULT_SIGNATURE  # TF Serving's default key: a request may leave it out
DEFAULT_MODEL_NAME = "gen"

# input name -> (TF dtype name, REST JSON python type)
INPUTS: dict[str, str] = {
    "prompt": "string",
    "max_new_tokens": "int32",
    "temperature": "float32",  # 0 = greedy
    "top_k": "int32",  # 0 = no top-k cut
    "top_p": "float32",  # 1.0 = no nucleus cut
    "seed": "int64",  # per-row stateless sampling seed
    "stop": "string",  # [B, STOP_SLOTS] stop sequences (UTF-8 bytes); "" = an unused slot
    "ignore_eos": "int32",  # != 0: decode past end-of-text (vLLM's ignore_eos): end-of-text
    # is never selected, so every generated token is a byte of `text` and a row ends only at its
    # length or a stop sequence (a selected end-of-text would be a token with no byte to resume
    # a stream from); `mean_nll` stays under the model's own distribution. int32, not bool: the
    # request builders' dtype tables and REST rows carry numbers and strings only
}

OUTPUTS: dict[str, str] = {
    "text": "string",  # the continuation only, valid UTF-8
    "prompt_tokens": "int32",  # prompt tokens the model saw (after keeping the window's end)
    "output_tokens": "int32",  # tokens generated: `text`'s plus a matched stop sequence's
    # (the end-of-text token is not counted)
    "finish_reason": "string",  # FINISH_STOP (end-of-text or a stop sequence) or FINISH_LENGTH
    "stop_index": "int32",  # the `stop` slot whose sequence ended the row, else NO_STOP
    "mean_nll": "float32",  # mean negative log-likelihood per generated token, >= 0
    "truncated_prompt_tokens": "int32",  # prompt tokens dropped from the start to fit the window
}

FINISH_STOP = "stop"
FINISH_LENGTH = "length"

# `stop`: a row ends, inside the model's decoding loop, once the bytes it generated end with one
# of its stop sequences; `text` leaves the sequence out (as OpenAI does), `output_tokens` counts
# it (as vLLM's usage does: the model did generate it). When several end at the same token, the
# longest wins: the text is cut where the first of them starts, as a client's own search for the
# earliest stop sequence in the text would cut it. Every row carries STOP_SLOTS slots,
# so rows of different requests batch together (TF Serving concatenates inputs along dim 0 and
# needs the other dims equal): OpenAI's 4 per request plus the gateway chat template's 6 fit.
STOP_SLOTS = 16
NO_STOP = -1
# What versions exported before in-graph stops lack: a caller sends these inputs only to a
# version whose signature (TF Serving's metadata) lists them, and does not require the outputs.
STOP_INPUTS = ("stop", "ignore_eos")
STOP_OUTPUTS = ("stop_index",)


def stop_slots(stops: tuple[str, ...] | list[str] = ()) -> list[str]:
    """A row's `stop` input: the sequences, then "" up to STOP_SLOTS."""
    if len(stops) > STOP_SLOTS:
        raise ValueError(f"at most {STOP_SLOTS} stop sequences per row, got {len(stops)}")
    return [*stops, *[""] * (STOP_SLOTS - len(stops))]


WARMUP_FILE = "assets.extra/tf_serving_warmup_requests"
GOLDEN_FILE = "assets.extra/golden_canary.json"
MAX_WARMUP_RECORDS = 1000


def default_row(prompt: str, max_new_tokens: int = 32) -> dict[str, object]:
    """One greedy request row with every input set (the shape REST `instances` expects)."""
    return {
        "prompt": prompt,
        "max_new_tokens": max_new_tokens,
        "temperature": 0.0,
        "top_k": 0,
        "top_p": 1.0,
        "seed": 0,
        "stop": stop_slots(),
        "ignore_eos": 0,
    }


# The `continue` signature: the next chunk of a generation, for streaming. Each call re-reads
# the prompt and the tokens generated so far (no KV state crosses calls) and generates up to
# `chunk` more. The sampler is keyed by (row seed, step), and `step` is the number of tokens
# already generated, so chunks concatenated equal the `serving_default` output for the same
# seed, token for token. The bytes of a subword model's text do not say which tokens the model
# chose (" the" can be one token or two), so the caller hands each chunk's `token_ids` back in
# `generated_ids` and the model prefills exactly those tokens. The window budget (which prompt
# tokens are kept, how many new tokens are allowed) is computed from `prompt` and the request's
# whole `max_new_tokens`, exactly as `serving_default` computes it.
CONTINUE_SIGNATURE_NAME = "continue"

CONTINUE_INPUTS: dict[str, str] = {
    "prompt": "string",  # the original prompt, UTF-8
    "generated": "string",  # bytes generated so far (may end in a partial UTF-8 character)
    "generated_ids": "string",  # the model's ids of the tokens generated so far: the earlier
    # chunks' `token_ids` joined by spaces ("" before the first chunk). A row with bytes but no
    # ids has its bytes tokenized as text, which may split them otherwise than the model did
    # (then the chunk need not equal unary's); a byte model reads `generated` and ignores them
    "step": "int32",  # tokens generated so far (the ids in generated_ids; a byte model's
    # len(generated)): the sampler's step offset
    "chunk": "int32",  # how many tokens this call may generate (K)
    "max_new_tokens": "int32",  # the request's whole budget, not the chunk's
    "temperature": "float32",
    "top_k": "int32",
    "top_p": "float32",
    "seed": "int64",
    "stop": "string",  # as in serving_default; `generated`'s tail counts, so a stop sequence
    # split between chunks ends the row when its last byte is generated
    "ignore_eos": "int32",  # as in serving_default
}

CONTINUE_OUTPUTS: dict[str, str] = {
    "tokens": "int32",  # [B, K'] the chunk's bytes, 0-padded past `n_tokens`
    "n_tokens": "int32",  # bytes in this chunk (a byte model's tokens; no end-of-text)
    "token_ids": "string",  # the ids of the chunk's tokens, space-separated decimals, for the
    # next call's `generated_ids` (a last token that a stop sequence ends in is one of them)
    "finish_reason": "string",  # "" while the row may go on, else FINISH_STOP / FINISH_LENGTH
    "stop_index": "int32",  # as in serving_default; `tokens` keeps the stop sequence's bytes
    # (its first ones may have come in an earlier chunk): the caller cuts them
    "nll_sum": "float32",  # summed negative log-likelihood of the tokens scored in this chunk
    "n_scored": "int32",  # tokens scored in this chunk (emitted ones plus a final end-of-text)
    "prompt_tokens": "int32",  # as in serving_default
    "truncated_prompt_tokens": "int32",  # as in serving_default
}

# What versions exported before `continue` took token ids lack (they decode a subword row again
# from its first token each call): a caller sends the input only to a version whose `continue`
# lists it, and does not require the output.
RESUME_INPUTS = ("generated_ids",)
RESUME_OUTPUTS = ("token_ids",)


def join_ids(ids: Iterable[int]) -> str:
    """Token ids as `generated_ids` and `token_ids` carry them: decimals separated by spaces."""
    return " ".join(map(str, ids))


def parse_ids(text: str) -> tuple[int, ...]:
    """The ids of a `token_ids` output (any whitespace between them); ValueError if one is no
    integer."""
    return tuple(int(t) for t in text.split())


FINISH_NONE = ""  # `continue` only: the row has budget left and has not stopped

# Tokens per `continue` call when a client streams: each call prefills the prompt and the ids
# generated so far (`generated_ids`), then decodes its chunk, so a small chunk costs throughput
# in prefills and a large one delays the first tokens. Measured on the trained default model
# (256-token window, BPE), 64 new tokens, batching on, 2 shared cores:
# - `tokenpulse bench continuation` (one `continue` call per chunk per stream): tokens/s against
#   unary at c=1/8/32 and first tokens at c=1 were, chunk 8: 0.63/0.60/0.53x and 0.20x;
#   16: 0.79/0.77/0.77x and 0.33x; 32: 0.94/0.85/0.87x and 0.55x. A chunk that grows per call
#   did worse under load there: a batch runs as many steps as its longest chunk.
# - Through the gateway, which sends every stream of a version in one `continue` call per chunk
#   step (serving/gateway/chunkbatch.py), `tokenpulse bench streaming` (first text at c=1, then
#   tokens/s and the mean processed batch at c=32, against unary; issue 19's targets <= 0.3x,
#   >= 0.8x, >= 24 of 32): a first chunk of 8 then 32, three runs: 0.21-0.22x, 0.79-0.84x,
#   20.6-25.9 (unary 15.0-15.3); 8 then 16: 0.22x, 0.76x, 26.4; 8 then 48 (two runs): 0.19-0.21x,
#   0.69-0.72x, 24.1-25.0; 8 then 64: 0.21-0.22x, 0.87-1.12x, 21.9-23.2; 16 throughout: 0.31x,
#   0.87x, 24.6; 32 throughout: 0.59x, 1.16x, 23.2. No setting met all three every time; 8 then
#   32 meets the first-text target with room and sits at the other two. The first chunk is small
#   for the first text; after it a stream's rows all ask for 32, and a batch's few first-chunk
#   rows only cost their spare steps.
DEFAULT_STREAM_CHUNK = 32
DEFAULT_STREAM_FIRST_CHUNK = 8


def continue_row(
    prompt: str,
    generated: bytes,
    chunk: int,
    max_new_tokens: int = 32,
    ids: list[int] | None = None,
) -> dict[str, object]:
    """One greedy `continue` row after `generated`, in REST row format (`generated` travels as
    `{"b64": ...}`): the bytes of the tokens `ids`, or, with no ids, bytes the model tokenizes."""
    import base64

    row = default_row(prompt, max_new_tokens)
    row.update(
        generated={"b64": base64.b64encode(generated).decode("ascii")},
        generated_ids=join_ids(ids or ()),
        step=len(generated) if ids is None else len(ids),
        chunk=chunk,
    )
    return row
