"""Kernel counts per decode step, taken in a TF1 session as `tensorflow_model_server` runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.opcount import executed_ops, ops_per_decode_step
from serving.model import session
from tokenpulse.tfserving import signature as sig

pytestmark = pytest.mark.graph_rewrites  # the stock server's loader rewrites the graph


def test_continue_runs_the_unary_decode_step_in_the_stock_servers_loader(
    tiny_export: Path,
) -> None:
    prompts = ["The", "hello there"]  # greedy rows of the tiny model that run past 18 tokens
    with session.load(tiny_export) as model:
        unary = ops_per_decode_step(model, prompts, 0.0, sig.SIGNATURE_NAME)
        resumed = ops_per_decode_step(model, prompts, 0.0, sig.CONTINUE_SIGNATURE_NAME)
    assert unary["total"] > 100  # a whole transformer step, not a stray op
    # The same loop: resumed from the ids of the tokens it generated, a `continue` step is a
    # unary step plus the sampler's step offset (an add, carried through the loop: 4 kernels;
    # before `continue` took ids, a step also did a replay's bookkeeping: 310 kernels to 285)
    assert unary["total"] <= resumed["total"] <= unary["total"] + 4
    for kernel in ("TensorStridedSliceUpdate", "Softmax", "_MklSoftmax"):
        assert resumed.get(kernel) == unary.get(kernel)


def test_an_unknown_signature_is_refused(tiny_export: Path) -> None:
    with session.load(tiny_export) as model, pytest.raises(ValueError, match="no rows for"):
        executed_ops(model, ["a"], 2, 0.0, "classify")
