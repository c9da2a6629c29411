"""The mixin's modules import each other at module level only, with no circle among them."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

MIXIN = Path(__file__).resolve().parents[3] / "monitoring" / "mixin"


def _local_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return [
        f"{path.name}:{node.lineno}"
        for fn in functions
        for node in ast.walk(fn)
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]


def test_no_function_local_imports_in_the_mixin() -> None:
    assert [hit for p in sorted(MIXIN.rglob("*.py")) for hit in _local_imports(p)] == []


def test_no_import_circle_among_the_rule_builders() -> None:
    graph = grimp.build_graph("monitoring", include_external_packages=False)
    names = ["alerts", "health", "rules", "model", "slis", "rulefiles", "alertmanager"]
    modules = [f"monitoring.mixin.{n}" for n in names]
    for a in modules:
        for b in modules:
            if a != b and graph.chain_exists(importer=a, imported=b):
                assert not graph.chain_exists(importer=b, imported=a), (a, b)
