"""Checks that a SavedModel only uses ops the stock `tensorflow_model_server` can run."""

from __future__ import annotations

from pathlib import Path

# Kernels that call back into a Python interpreter, which the C++ server does not have.
PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


def saved_model_ops(export_dir: Path) -> set[str]:
    """Every op type in the SavedModel's graphs, function library included."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((export_dir / "saved_model.pb").read_bytes())
    ops: set[str] = set()
    for meta in proto.meta_graphs:
        ops.update(node.op for node in meta.graph_def.node)
        for fn in meta.graph_def.library.function:
            ops.update(node.op for node in fn.node_def)
    return ops


def unservable_ops(export_dir: Path) -> dict[str, str]:
    """Op type -> reason, for each op the stock server could not run (empty when all is well)."""
    from tensorflow.python.framework import op_def_registry

    bad: dict[str, str] = {}
    fn_names = _function_names(export_dir)
    for op in sorted(saved_model_ops(export_dir)):
        if op in PYTHON_OPS:
            bad[op] = "calls into Python (tf.py_function / numpy_function)"
        elif op.startswith("Xla"):
            bad[op] = "XLA-only op"
        elif op not in fn_names and op_def_registry.get(op) is None:
            bad[op] = "not a registered TensorFlow core op (custom op library?)"
    return bad


def _function_names(export_dir: Path) -> set[str]:
    """Library function names: a node may call one of these by name instead of a real op."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((export_dir / "saved_model.pb").read_bytes())
    return {fn.signature.name for m in proto.meta_graphs for fn in m.graph_def.library.function}
