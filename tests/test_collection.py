"""Collecting the suite imports neither TensorFlow nor Keras.

Every xdist worker collects every module: a test module that imports TensorFlow at its top
(itself, or through one of our modules that does) costs each worker ~2 CPU-s, and Keras, which a
bare `import tensorflow` brings along, 0.7 s more. Modules that test TensorFlow code import it in
their fixtures and tests instead (tests/support/tfsetup.py's hook leaves Keras out then).

Checked from the source, importing nothing. What importing a module runs is every statement
outside a function's body (its decorators and defaults, and class bodies, included), less
`if TYPE_CHECKING:` blocks; our modules imported there are followed, packages' `__init__`
included. To keep this cheap (~0.25 s), the files are read as text first, and only the few dozen
whose imports outside a def (or text in a string that reads like one) could reach TensorFlow are
parsed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path

from tokenpulse.paths import ROOT

# what must not be imported at collection, and third-party packages that import it on import
HEAVY = {"tensorflow", "keras", "keras_hub", "tensorflow_serving", "tensorflow_text", "tf_keras"}
CALLS = {"import_tensorflow"}  # tokenpulse.tfimport's `import tensorflow`

# a line that starts a def, another compound statement, or an import (`from a import (b, c)`
# over several lines), with its indentation
_LINE = re.compile(
    r"^([ \t]*)(?:(async[ \t]+def|def)\b|(?:class|if|elif|else|try|except|finally|with|for|while"
    r"|match|case|async)\b|(from[ \t]+[\w.]+[ \t]+import[ \t]+(?:\([^)]*\)|[^\n;]*)"
    r"|import[ \t]+[^\n;]*))",
    re.M,
)
_IMPORT = re.compile(r"from[ \t]+([\w.]+)[ \t]+import[ \t]+(.*)|import[ \t]+(.*)", re.S)

Edge = tuple[int, str, Path | None]  # the line, the module it imports, and its file if ours


@cache
def _module_file(name: str) -> Path | None:
    """The file of one of our modules (a package: its `__init__.py`), else None."""
    base = ROOT.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _edges(line: int, names: Iterable[str]) -> Iterator[Edge]:
    """An import of `a.b.c` runs `a`, `a.b` and `a.b.c`."""
    for name in names:
        parts = name.strip(".").split(".")
        for i in range(len(parts)):
            module = ".".join(parts[: i + 1])
            yield line, module, _module_file(module)


def _text_edges(text: str) -> Iterator[Edge]:
    """The imports outside any def, read line by line: every one that importing the module runs,
    and more (those in strings that read like code, or under `if TYPE_CHECKING:`)."""
    defs: list[int] = []  # the indentation of each def the line is in
    for match in _LINE.finditer(text):
        indent, is_def, statement = match.groups()
        while defs and defs[-1] >= len(indent):
            defs.pop()  # a line as far left as the def's: its body has ended
        if is_def:
            defs.append(len(indent))
        elif statement and not defs:
            source, names, modules = _IMPORT.match(statement).groups()  # type: ignore[union-attr]
            if source is None:
                yield from _edges(0, re.findall(r"[\w.]+", modules))
            else:  # `from package import name`: the name may be a submodule
                words = re.findall(r"\w+", names)
                yield from _edges(0, [source, *(f"{source}.{w}" for w in words)])


def _run_on_import(tree: ast.Module) -> Iterator[ast.AST]:
    """The nodes that importing the module runs: not a function's body, nor `if TYPE_CHECKING:`."""
    todo: list[ast.AST] = list(reversed(tree.body))
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            # its decorators and default values run now; its body at a call
            later: list[ast.AST] = [*node.decorator_list, *node.args.defaults]
            later += [d for d in node.args.kw_defaults if d is not None]
        elif isinstance(node, ast.Lambda):
            later = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            later = list(node.orelse)
        else:
            later = list(ast.iter_child_nodes(node))
        todo.extend(reversed(later))


def _is_type_checking(test: ast.expr) -> bool:
    """`if TYPE_CHECKING:` or `if typing.TYPE_CHECKING:`"""
    name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
    return name == "TYPE_CHECKING"


def _parsed_edges(path: Path) -> tuple[list[Edge], list[str]]:
    """The imports that importing the module at `path` runs, and its imports of HEAVY or
    calls that import it ("line: what")."""
    edges: list[Edge] = []
    heavy: list[str] = []
    package = list(path.relative_to(ROOT).parts[:-1])
    for node in _run_on_import(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            edges += _edges(node.lineno, [alias.name for alias in node.names])
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], base])
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            edges += _edges(node.lineno, names)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in CALLS:
                heavy.append(f"{node.lineno}: calls {name}()")
    heavy += [f"{line}: imports {name}" for line, name, _ in edges if name.split(".")[0] in HEAVY]
    return [e for e in edges if e[2] is not None and e[2] != path], heavy


def _importers_of_heavy(
    edges: dict[Path, list[Edge]], direct: dict[Path, str]
) -> dict[Path, tuple[str, Path | None]]:
    """Each file whose import reaches HEAVY: what it does on the way ("line: ..."), and the
    file it goes on to (None: it imports HEAVY itself). Breadth first: the shortest way."""
    found: dict[Path, tuple[str, Path | None]] = {p: (why, None) for p, why in direct.items()}
    importers: dict[Path, list[tuple[Path, Edge]]] = {}
    for path, out in edges.items():
        for edge in out:
            assert edge[2] is not None
            importers.setdefault(edge[2], []).append((path, edge))
    frontier = list(found)
    while frontier:
        reached = frontier.pop(0)
        for importer, (line, name, _) in importers.get(reached, []):
            if importer not in found:
                found[importer] = (f"{line}: imports {name}", reached)
                frontier.append(importer)
    return found


def _may_import_heavy(tests: list[Path]) -> set[Path]:
    """The files, from `tests` and the modules their text names, whose text could import HEAVY
    (itself, or by way of another such file)."""
    edges: dict[Path, list[Edge]] = {}
    direct: dict[Path, str] = {}
    todo = list(tests)
    while todo:
        path = todo.pop()
        if path in edges:
            continue
        text = path.read_text()
        out = list(_text_edges(text))
        edges[path] = [e for e in out if e[2] is not None]
        relative = "from ." in text  # left to the parse
        if relative or any(call in text for call in CALLS) or any(e[1] in HEAVY for e in out):
            direct[path] = ""
        todo += [e[2] for e in edges[path] if e[2] is not None]
    return set(_importers_of_heavy(edges, direct))


def test_no_test_module_imports_tensorflow_or_keras_at_collection() -> None:
    tests = sorted((ROOT / "tests").rglob("*.py"))
    suspects = _may_import_heavy(tests)
    edges: dict[Path, list[Edge]] = {}
    direct: dict[Path, str] = {}
    for path in suspects:
        edges[path], heavy = _parsed_edges(path)
        if heavy:
            direct[path] = heavy[0]
    found = _importers_of_heavy(edges, direct)
    wrong: list[str] = []
    for path in (p for p in tests if p in found):
        steps: list[str] = []
        at: Path | None = path
        while at is not None:
            why, after = found[at]
            steps.append(f"{at.relative_to(ROOT)}:{why}")
            at = after
        wrong.append(" -> ".join(steps))
    assert wrong == [], "import it in the fixture or test that uses it:\n" + "\n".join(wrong)
