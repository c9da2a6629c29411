"""The mixin's modules import each other at module level only, with no circle among them, and
its builders read no config from module globals: they are handed a MixinConfig."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

from tokenpulse.paths import ROOT

MIXIN = ROOT / "monitoring" / "mixin"


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
    names = ["alerts", "alerts.gateway", "alerts.tfserving", "rules", "model", "slis", "rulefiles",
             "alertmanager"]  # fmt: skip
    modules = [f"monitoring.mixin.{n}" for n in names]
    for a in modules:
        for b in modules:
            if a != b and graph.chain_exists(importer=a, imported=b):
                assert not graph.chain_exists(importer=b, imported=a), (a, b)


def _config_globals(path: Path) -> list[str]:
    """Names a module imports from the config module other than its types, and reads of the
    config module itself (`config.X`)."""
    tree = ast.parse(path.read_text())
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "monitoring.mixin.config":
            hits += [a.name for a in node.names if not a.name[0].isupper() or a.name.isupper()]
        if isinstance(node, ast.ImportFrom) and node.module == "monitoring.mixin":
            hits += [a.name for a in node.names if a.name == "config"]
    return [f"{path.relative_to(MIXIN)}: {name}" for name in hits]


def test_builders_read_no_config_globals() -> None:
    """Only classes come from the config module (MixinConfig, Links, Slo, ...): no `DEFAULT`,
    no module-level thresholds, so a deployment's config is the one every builder renders."""
    builders = [p for p in sorted(MIXIN.rglob("*.py")) if p.name != "config.py"]
    assert [hit for p in builders for hit in _config_globals(p)] == []
