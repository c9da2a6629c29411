"""The load test's modules import one another without a cycle: `measure.one_run` is what the
runner and the seed scenario both call, so neither imports the other for it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import stack.loadtest

PACKAGE = Path(stack.loadtest.__file__).parent


def _imports() -> dict[str, set[str]]:
    """module -> the package's modules it imports, anywhere in it (a function-local import that
    dodges a cycle is still a cycle)."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "stack.loadtest":
                    found |= {alias.name for alias in node.names}
                elif node.module.startswith("stack.loadtest."):
                    found.add(node.module.rsplit(".", 1)[1])
            elif isinstance(node, ast.Import):
                found |= {
                    a.name.rsplit(".", 1)[1] for a in node.names
                    if a.name.startswith("stack.loadtest.")
                }  # fmt: skip
        graph[path.stem] = found - {path.stem}
    return graph


def test_no_module_of_the_load_test_imports_itself_back() -> None:
    graph = _imports()
    assert "measure" in graph["runner"] and "measure" in graph["scenario"]

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    cycles = sorted(m for m in graph if reaches(m, m, {m}))
    assert cycles == []


def test_the_scenario_imports_without_the_runner() -> None:
    code = "import sys, stack.loadtest.scenario\nprint('stack.loadtest.runner' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
