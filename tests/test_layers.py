"""The import contract: foundation <- apps <- stack <- devtools <- tests, every arrow down.

The layers are read from pyproject's [tool.importlinter] (what `make lint` runs), and checked here
with grimp, the graph import-linter builds on, so a wrong arrow fails the suite.
"""

from __future__ import annotations

import tomllib

import grimp
import pytest

from stack import cli
from tokenpulse.paths import ROOT

CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
(CONTRACT,) = CONFIG["contracts"]


def _layers() -> list[grimp.Layer]:
    out = []
    for spec in CONTRACT["layers"]:
        names = [n.strip() for n in spec.split("|")]
        out.append(grimp.Layer(*names, independent=True))
    return out


def _graph() -> grimp.ImportGraph:
    """The tree's imports, plus the CLI's by-name imports of its command modules."""
    graph = grimp.build_graph(
        *CONFIG["root_packages"], include_external_packages=False, cache_dir=None
    )
    for module_name, _ in cli.COMMANDS.values():
        graph.add_import(
            importer="stack.cli", imported=module_name, line_number=0, line_contents="COMMANDS"
        )
    return graph


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return _graph()


def _describe(found: set[grimp.PackageDependency]) -> list[str]:
    return sorted(
        f"{dep.importer} -> {dep.imported}: {sorted(h for r in dep.routes for h in r.heads)}"
        for dep in found
    )


def test_every_import_points_down(graph: grimp.ImportGraph) -> None:
    assert _describe(graph.find_illegal_dependencies_for_layers(layers=_layers())) == []


def test_the_contract_covers_every_package_of_the_tree(graph: grimp.ImportGraph) -> None:
    in_layers = {n.strip() for spec in CONTRACT["layers"] for n in spec.split("|")}
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages == in_layers == set(CONFIG["root_packages"])


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("tokenpulse.paths", "stack.cli"),  # the foundation reaching up
        ("serving.gateway.app", "log_pipeline.sink"),  # one app into another
        ("stack.up.components", "devtools.stack"),  # the runtime on development tools
        ("exporter.server", "tests.conftest"),  # anything on the tests
        ("stack.cli", "devtools.bench.model"),  # a command table entry reaching up
    ],
)
def test_one_added_upward_import_breaks_the_contract(importer: str, imported: str) -> None:
    broken = _graph()
    broken.add_import(importer=importer, imported=imported, line_number=1, line_contents="import")
    found = _describe(broken.find_illegal_dependencies_for_layers(layers=_layers()))
    assert any(importer in line for line in found), found
