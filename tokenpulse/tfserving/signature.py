"""The `serving_default` contract of every exported version, importable without TensorFlow.

The model server, gateway, exporter and tests all speak this contract. Every input carries a
leading batch dimension, because TF Serving's batcher concatenates requests along dim 0.
"""

from __future__ import annotations

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
}

OUTPUTS: dict[str, str] = {
    "text": "string",  # the continuation only, valid UTF-8
    "prompt_tokens": "int32",  # prompt tokens the model saw (after keeping the window's end)
    "output_tokens": "int32",  # tokens in `text` (the end-of-text token is not counted)
    "finish_reason": "string",  # FINISH_STOP (end-of-text emitted) or FINISH_LENGTH
    "mean_nll": "float32",  # mean negative log-likelihood per generated token, >= 0
    "truncated_prompt_tokens": "int32",  # prompt tokens dropped from the start to fit the window
}

FINISH_STOP = "stop"
FINISH_LENGTH = "length"

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
    }
