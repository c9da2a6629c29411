"""Which ops the stock server runs: TensorFlow's own and the TF.Text ones it links in."""

from __future__ import annotations

from serving.model import opcheck
from tokenpulse.tfserving.ops import TF_TEXT_OPS, register_tf_text_ops


def test_the_tf_text_ops_tf_serving_links_are_servable_and_registered_on_demand() -> None:
    from tensorflow.python.framework import op_def_registry

    register_tf_text_ops({"NoSuchOp"})  # no TF.Text op asked for: nothing to register
    register_tf_text_ops({"RegexSplitWithOffsets"})
    assert [op for op in sorted(TF_TEXT_OPS) if op_def_registry.get(op) is None] == []
    assert {op: opcheck.unservable_reason(op) for op in TF_TEXT_OPS} == dict.fromkeys(
        TF_TEXT_OPS, ""
    )
    assert opcheck.unservable_reason("SomeCustomOp") != ""  # any other custom op still fails
    assert opcheck.unservable_reason("EagerPyFunc") != ""
