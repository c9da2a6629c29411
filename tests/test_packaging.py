"""Runtime dependencies are what the runtime imports; the image installs those and nothing else."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
RUNTIME_PACKAGES = ("tokenpulse", "serving", "exporter", "log_pipeline", "monitoring", "stack")
TREE_PACKAGES = (*RUNTIME_PACKAGES, "devtools")
# The development tools (benches, stand-ins, the test stack) are not shipped; they may use extras.
NOT_RUNTIME = ("devtools",)
DEV_TOOLS = {"pytest", "pytest-timeout", "hypothesis", "schemathesis", "openai", "keras-hub"}
DEV_TOOLS |= {"ruff", "mypy", "fastapi", "uvicorn", "tensorboard"}


def _names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def _closure(names: set[str]) -> set[str]:
    """The distributions `names` pull in on this platform (extras not requested)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for text in md.distribution(name).requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return seen


def _imports(files: list[Path]) -> dict[str, set[str]]:
    """Third-party distribution -> files importing it."""
    owners = md.packages_distributions()
    found: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top in TREE_PACKAGES:
                    continue
                for dist in owners.get(top, [top]):
                    found.setdefault(canonicalize_name(dist), set()).add(
                        str(path.relative_to(ROOT))
                    )
    return found


def _files(runtime: bool) -> list[Path]:
    files = [f for pkg in TREE_PACKAGES for f in sorted((ROOT / pkg).rglob("*.py"))]
    return [f for f in files if f.relative_to(ROOT).as_posix().startswith(NOT_RUNTIME) != runtime]


RUNTIME = _names(PYPROJECT["project"]["dependencies"])
EXTRAS = {k: _names(v) for k, v in PYPROJECT["project"]["optional-dependencies"].items()}


def test_no_dev_tool_is_a_runtime_dependency() -> None:
    assert not RUNTIME & {canonicalize_name(n) for n in DEV_TOOLS}
    assert EXTRAS["bench-model"] == {"keras-hub"}


def test_every_runtime_import_is_a_dependency_and_every_dependency_is_imported() -> None:
    imported = _imports(_files(runtime=True))
    missing = {dist: files for dist, files in imported.items() if dist not in _closure(RUNTIME)}
    assert not missing, f"imported at runtime but not in pyproject dependencies: {missing}"
    unused = {name for name in RUNTIME if name not in imported}
    assert not unused, f"runtime dependencies nothing imports (move them to an extra): {unused}"


def test_bench_and_test_support_imports_are_covered_by_the_extras() -> None:
    allowed = _closure(RUNTIME.union(*EXTRAS.values()))
    imported = _imports(_files(runtime=False))
    assert not {dist: files for dist, files in imported.items() if dist not in allowed}


def test_lock_pins_every_dependency_at_the_pyproject_version() -> None:
    lock = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            lock[canonicalize_name(name)] = version.strip()
    for text in PYPROJECT["project"]["dependencies"]:
        req = Requirement(text)
        assert {str(s) for s in req.specifier} == {f"=={lock[canonicalize_name(req.name)]}"}
    unpinned = _closure(RUNTIME) - set(lock) - {"pip", "setuptools", "wheel"}  # as pip freeze
    assert not unpinned, f"runtime distributions requirements.lock does not pin: {unpinned}"


def test_image_installs_the_runtime_set_only_and_keeps_the_context_small() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    lines = dockerfile.replace("\\\n", " ").splitlines()
    runs = " ".join(line for line in lines if line.startswith("RUN "))
    assert "['project']['dependencies']" in runs and "-c requirements.lock" in runs
    assert "-r requirements.lock" not in runs and "[dev]" not in runs and "[test]" not in runs
    assert "--no-deps ." in runs
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".git", "models/", "run/", ".cache/", "**/__pycache__"} <= set(ignored)


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The file list of the wheel `pip wheel .` builds from this checkout."""
    out = tmp_path_factory.mktemp("wheel")
    argv = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = out.glob("tokenpulse-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheel_ships_the_runtime_and_no_bench_stand_in_or_test_code(
    wheel_files: list[str],
) -> None:
    tops = {name.split("/")[0] for name in wheel_files if ".dist-info/" not in name}
    assert tops == set(RUNTIME_PACKAGES)
    assert "stack/cli.py" in wheel_files and "stack/components.py" in wheel_files
    leaked = [
        n for n in wheel_files if re.search(r"(^|/)(devtools|tests?|bench|standins?)(/|_)", n)
    ]
    assert leaked == []
    assert any(n.endswith(".dist-info/entry_points.txt") for n in wheel_files)
    assert PYPROJECT["project"]["scripts"] == {"tokenpulse": "stack.cli:main"}


def test_the_image_copies_the_runtime_packages_only() -> None:
    copies = re.findall(r"^COPY (\S+) \./", (ROOT / "Dockerfile").read_text(), re.M)
    packages = [c for c in copies if (ROOT / c / "__init__.py").is_file()]
    assert sorted(packages) == sorted(RUNTIME_PACKAGES)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {"devtools/", "tests/"} <= set(ignored)
