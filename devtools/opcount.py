"""Counts the kernels one decode step runs, in a TF1 session as `tensorflow_model_server` runs it.

The count is taken, not read off the graph: the SavedModel is loaded as the stock server loads
it (`serving/model/session.py`: Grappler and control-flow lowering included), a request is run
with a full trace, and every executed node is counted. Two requests that differ only in how
many tokens they generate differ only in decode steps, so their difference per extra token is
the per-step figure. Both signatures can be counted: `serving_default` (`max_new_tokens` tokens) and
`continue` (one chunk of that many tokens, resumed after the first chunk of the same generation,
its token ids handed back as the gateway hands them).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tokenpulse.tfserving import signature as sig

SHORT, LONG = 2, 18
RESUMED = 2  # tokens of the first chunk, which a counted `continue` call resumes after


def request_rows(
    signature: str, prompts: list[str], new_tokens: int, model: Any = None
) -> list[dict[str, Any]]:
    """Greedy rows of `signature` that each generate `new_tokens` tokens unless they stop
    (`continue`: after a first chunk that `model`, a loaded session, answers)."""
    if signature == sig.SIGNATURE_NAME:
        return [sig.default_row(p, new_tokens) for p in prompts]
    if signature == sig.CONTINUE_SIGNATURE_NAME and model is not None:
        budget = RESUMED + new_tokens
        first = model.run(
            signature, [_raw(sig.continue_row(p, b"", RESUMED, budget)) for p in prompts]
        )
        rows = []
        for i, p in enumerate(prompts):
            got = bytes(first["tokens"][i][: int(first["n_tokens"][i])].tolist())
            ids = list(sig.parse_ids(first["token_ids"][i].decode()))
            rows.append(_raw(sig.continue_row(p, got, new_tokens, budget, ids)))
        return rows
    raise ValueError(f"no rows for signature {signature!r}")


def _raw(row: dict[str, Any]) -> dict[str, Any]:
    """A row with `generated` as the raw bytes a TensorProto carries (not REST's `b64`)."""
    import base64

    return row | {"generated": base64.b64decode(row["generated"]["b64"])}


def executed_ops(
    model: Any,
    prompts: list[str],
    new_tokens: int,
    temperature: float,
    signature: str = sig.SIGNATURE_NAME,
) -> Counter[str]:
    """Op type -> kernel runs for one request of `signature` in `model`, a version loaded as the
    stock server loads it (`session.load`; checks no row stopped early)."""
    import tensorflow as tf

    rows = request_rows(signature, prompts, new_tokens, model)
    rows = [r | {"temperature": temperature} for r in rows]
    model.run(signature, rows)  # the first run pays one-off work; count the second
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    metadata = tf.compat.v1.RunMetadata()
    out = model.run(signature, rows, options=options, run_metadata=metadata)
    # `continue` counts its chunk's bytes in n_tokens; its tokens are the ones it scored
    produced = out["output_tokens" if signature == sig.SIGNATURE_NAME else "n_scored"]
    if int(produced.min()) != new_tokens:
        raise RuntimeError(f"a row stopped early ({produced.tolist()}); the count needs full rows")
    ops: Counter[str] = Counter()
    for device in metadata.step_stats.dev_stats:
        for node in device.node_stats:
            # timeline_label reads "name = OpType(inputs)"; runtime-internal entries have none
            if " = " in node.timeline_label:
                ops[node.timeline_label.split(" = ", 1)[1].split("(", 1)[0]] += 1
    return ops


def ops_per_decode_step(
    model: Any,
    prompts: list[str],
    temperature: float = 0.0,
    signature: str = sig.SIGNATURE_NAME,
) -> dict[str, float]:
    """Op type -> kernel runs per decode step, and "total", for a batch of `prompts` in `model`
    (a version loaded once with `session.load` serves every count: a load with the stock
    server's rewrites costs seconds, a count a fraction of one)."""
    short = executed_ops(model, prompts, SHORT, temperature, signature)
    long = executed_ops(model, prompts, LONG, temperature, signature)
    per_step = {op: (long[op] - short[op]) / (LONG - SHORT) for op in long | short}
    per_step = {op: n for op, n in sorted(per_step.items(), key=lambda kv: -kv[1]) if n}
    return {"total": sum(per_step.values()), **per_step}
