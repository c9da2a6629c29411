"""Checks that a SavedModel only uses ops the stock `tensorflow_model_server` can run.

`unservable_ops` looks at every op in the file; `signature_ops` walks from each signature's
outputs through the graph and every function it calls (loops, conditionals, nested calls), so a
check can say which signature an op belongs to and that each signature is really there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenpulse.tfserving.ops import TF_TEXT_OPS, saved_model_ops
from tokenpulse.tfserving.ops import read_saved_model as _saved_model

__all__ = ["saved_model_ops", "signature_ops", "unservable_ops", "unservable_reason"]

# Kernels that call back into a Python interpreter, which the C++ server does not have.
PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


def signature_ops(export_dir: Path, tag: str = "serve") -> dict[str, set[str]]:
    """Signature name -> every op type its outputs depend on, called functions included."""
    for meta in _saved_model(export_dir).meta_graphs:
        if tag in meta.meta_info_def.tags:
            graph = meta.graph_def
            functions = {fn.signature.name: fn for fn in graph.library.function}
            nodes = {node.name: node for node in graph.node}
            return {
                name: _reachable_ops([t.name for t in sig.outputs.values()], nodes, functions)
                for name, sig in meta.signature_def.items()
            }
    raise ValueError(f"no meta graph tagged {tag!r} in {export_dir}")


def _reachable_ops(
    outputs: list[str], nodes: dict[str, Any], functions: dict[str, Any]
) -> set[str]:
    """Op types of the graph nodes behind `outputs` and of every function they call."""
    ops: set[str] = set()
    seen_nodes: set[str] = set()
    seen_fns: set[str] = set()
    todo = [_node_name(t) for t in outputs]
    fn_todo: list[str] = []
    while todo:
        name = todo.pop()
        if name in seen_nodes or name not in nodes:
            continue
        seen_nodes.add(name)
        node = nodes[name]
        ops.add(node.op)
        fn_todo += _called(node, functions)
        todo += [_node_name(i) for i in node.input]
    while fn_todo:
        fn_name = fn_todo.pop()
        if fn_name in seen_fns:
            continue
        seen_fns.add(fn_name)
        for node in functions[fn_name].node_def:
            ops.add(node.op)
            fn_todo += _called(node, functions)
    return ops - functions.keys()  # a call by name is not an op of its own


def _node_name(tensor: str) -> str:
    """'^name', 'name:0' or 'name' -> 'name'."""
    return tensor.lstrip("^").split(":", 1)[0]


def _called(node: Any, functions: dict[str, Any]) -> list[str]:
    """Library functions a node runs: through a function attr (calls, loops, conds) or its op."""
    called = [node.op] if node.op in functions else []
    for attr in node.attr.values():
        if attr.HasField("func"):
            called.append(attr.func.name)
        called += [f.name for f in attr.list.func]
    return [name for name in called if name in functions]


def unservable_ops(export_dir: Path) -> dict[str, str]:
    """Op type -> reason, for each op the stock server could not run (empty when all is well)."""
    fn_names = _function_names(export_dir)
    return {
        op: reason
        for op in sorted(saved_model_ops(export_dir))
        if op not in fn_names and (reason := unservable_reason(op))
    }


def unservable_reason(op: str) -> str:
    """Why the stock server could not run an op type ('' when it can)."""
    from tensorflow.python.framework import op_def_registry

    if op in TF_TEXT_OPS:
        return ""
    if op in PYTHON_OPS:
        return "calls into Python (tf.py_function / numpy_function)"
    if op.startswith("Xla"):
        return "XLA-only op"
    if op_def_registry.get(op) is None:
        return "not a registered TensorFlow core op (custom op library?)"
    return ""


def _function_names(export_dir: Path) -> set[str]:
    """Library function names: a node may call one of these by name instead of a real op."""
    proto = _saved_model(export_dir)
    return {fn.signature.name for m in proto.meta_graphs for fn in m.graph_def.library.function}
