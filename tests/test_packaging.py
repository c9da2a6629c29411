"""Each component's install set is what its commands import, and each image installs its set only.

pyproject's `dependencies` are the common set; each component's extra (and the Dockerfile's target
of the same name) adds the rest. Only `model` brings TensorFlow. tests/test_images.py installs the
slim sets into fresh venvs and sizes them.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from scripts.requirements import requirements
from stack.cli import COMMANDS
from stack.components import SINK
from tokenpulse.paths import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = canonicalize_name(PYPROJECT["project"]["name"])
RUNTIME_PACKAGES = ("tokenpulse", "serving", "exporter", "log_pipeline", "monitoring", "stack")
TREE_PACKAGES = (*RUNTIME_PACKAGES, "devtools")
# The development tools (benches, stand-ins, the test stack) are not shipped; they may use extras.
NOT_RUNTIME = ("devtools",)
# keras-hub is no dev tool either: `model import keras-hub` reads its presets
DEV_TOOLS = {"pytest", "pytest-timeout", "hypothesis", "schemathesis", "openai"}
# tensorboard is no dev tool: training writes its histograms with its summary metadata
DEV_TOOLS |= {"ruff", "mypy", "fastapi", "uvicorn", "py-spy"}
TF_DISTS = {"tensorflow", "tensorflow-serving-api", "tensorflow-text", "keras", "tensorboard"}
TF_MODULES = {"tensorflow", "tensorflow_serving", "tensorflow_text", "keras", "tensorboard"}


class InstallSet(NamedTuple):
    """An install set: the common dependencies plus `extra` (None: the common set alone)."""

    extra: str | None
    commands: tuple[str, ...]  # `tokenpulse` subcommands (stack.cli.COMMANDS) it runs
    loads: tuple[str, ...] = ()  # modules it imports by name from its settings


INSTALL_SETS: dict[str, InstallSet] = {
    "model": InstallSet("model", ("model", "modelserver")),
    "gateway": InstallSet("gateway", ("gateway",), loads=(SINK.partition(":")[0],)),
    "exporter": InstallSet("exporter", ("exporter",)),
    "shipper": InstallSet("shipper", ("shipper", "es", "samples")),
    "oncall": InstallSet("oncall", ("oncall-receiver", "alertmanager-check", "links")),
    "monitoring": InstallSet("monitoring", ("dashboards", "grafana")),
    "all": InstallSet("all", ("up", "build", "loadtest", "rollout", "drill", "soak")),  # stack
}
IMAGES = ("model", "gateway", "exporter", "shipper", "oncall")  # the Dockerfile's COMPONENTs
IMAGE_STAGE = "component"  # the Dockerfile stage every image is built from
RUNTIME_UID = 10001  # the images' unprivileged user and group
SLIM = ("gateway", "exporter", "shipper", "oncall")  # no TensorFlow


def _names(lines: list[str]) -> set[str]:
    """Distribution names; the project's own extras (`tokenpulse[a,b]`) are left out."""
    names: set[str] = {canonicalize_name(Requirement(r).name) for r in lines}
    return names - {PROJECT}


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


def install_set(component: str) -> list[str]:
    """The requirement lines a component's venv or image installs (scripts/requirements.py)."""
    extra = INSTALL_SETS[component].extra
    return requirements([extra] if extra else [])


def _module_file(module: str) -> Path | None:
    path = ROOT.joinpath(*module.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _spec_lookup(node: ast.AST) -> str | None:
    """The module of `importlib.util.find_spec("name")`: a dependency found without importing
    it (tokenpulse/tfserving/ops.py loads TF.Text's kernel libraries from its package)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        if name == "find_spec" and node.args and isinstance(node.args[0], ast.Constant):
            value = node.args[0].value
            return value if isinstance(value, str) else None
    return None


def _imported_modules(path: Path, package: str) -> list[str]:
    """Absolute names of every module `path` imports, at any depth (function-level too), or
    finds with `find_spec`."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if spec := _spec_lookup(node):
            found.append(spec)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            found.append(base)
            found += [f"{base}.{alias.name}" for alias in node.names]
    return found


def reach(roots: tuple[str, ...]) -> tuple[set[str], dict[str, set[str]]]:
    """(tree modules, third-party top-level module -> tree modules importing it) from `roots`.

    Static and conservative: every import in a reached module counts, lazy ones included, and
    importing `a.b.c` reaches `a` and `a.b` as Python does.
    """
    modules: set[str] = set()
    third: dict[str, set[str]] = {}
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module in modules:
            continue
        path = _module_file(module)
        if path is None:
            continue  # `from pkg import name` where name is not a module
        modules.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        package = module if path.name == "__init__.py" else ".".join(parts[:-1])
        for name in _imported_modules(path, package):
            top = name.split(".")[0]
            if top in RUNTIME_PACKAGES:
                todo.append(name)
            elif top and top not in sys.stdlib_module_names and top != "__future__":
                third.setdefault(top, set()).add(module)
    return modules, third


def component_roots(component: str) -> tuple[str, ...]:
    spec = INSTALL_SETS[component]
    return ("stack.cli", *(COMMANDS[c][0] for c in spec.commands), *spec.loads)


def _uncovered(third: dict[str, set[str]], installed: set[str]) -> dict[str, set[str]]:
    """Third-party imports none of whose owning distributions is in `installed`."""
    owners = md.packages_distributions()
    return {
        top: users
        for top, users in third.items()
        if not {canonicalize_name(d) for d in owners.get(top, [top])} & installed
    }


def _imports(files: list[Path]) -> dict[str, set[str]]:
    """Third-party distribution -> files importing it."""
    owners = md.packages_distributions()
    found: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if spec := _spec_lookup(node):
                modules = [spec]
            elif isinstance(node, ast.Import):
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


def _own_lines(extra: str) -> list[str]:
    """An extra's own pins, without its references to other extras of the project."""
    lines = PYPROJECT["project"]["optional-dependencies"][extra]
    return [r for r in lines if canonicalize_name(Requirement(r).name) != PROJECT]


COMMON = _names(PYPROJECT["project"]["dependencies"])
EXTRAS = {k: _names(v) for k, v in PYPROJECT["project"]["optional-dependencies"].items()}
RUNTIME = _names(requirements(["all"]))  # every component's set together


def test_every_command_runs_in_exactly_one_component_whose_extra_exists() -> None:
    served = [c for spec in INSTALL_SETS.values() for c in spec.commands]
    assert sorted(served) == sorted(COMMANDS), "give each tokenpulse command a component"
    extras = {spec.extra for spec in INSTALL_SETS.values()} - {None}
    assert extras <= set(EXTRAS)
    assert set(IMAGES) | set(SLIM) <= set(INSTALL_SETS)


@pytest.mark.parametrize("component", list(INSTALL_SETS))
def test_each_component_set_covers_what_its_commands_import(component: str) -> None:
    _, third = reach(component_roots(component))
    installed = _closure(_names(install_set(component)))
    missing = _uncovered(third, installed)
    assert not missing, f"{component}: imported but not installed by its set: {missing}"


@pytest.mark.parametrize("component", SLIM)
def test_the_slim_sets_neither_import_nor_install_tensorflow(component: str) -> None:
    _, third = reach(component_roots(component))
    assert not {top: users for top, users in third.items() if top in TF_MODULES}
    assert not _closure(_names(install_set(component))) & TF_DISTS
    assert "tensorflow" in _closure(_names(install_set("model")))  # the check can fail


@pytest.mark.parametrize("extra", [s.extra for s in INSTALL_SETS.values() if s.extra])
def test_each_extra_pin_is_imported_by_the_commands_it_serves(extra: str) -> None:
    (component,) = [name for name, spec in INSTALL_SETS.items() if spec.extra == extra]
    _, third = reach(component_roots(component))
    owners = md.packages_distributions()
    imported = {canonicalize_name(d) for top in third for d in owners.get(top, [top])}
    unused = _names(_own_lines(extra)) - imported
    assert not unused, f"the {extra} extra pins what its commands never import: {unused}"


def test_the_common_set_is_what_every_slim_component_imports() -> None:
    owners = md.packages_distributions()
    for component in SLIM:
        _, third = reach(component_roots(component))
        imported = {canonicalize_name(d) for top in third for d in owners.get(top, [top])}
        assert COMMON <= imported, f"{component} does not import {COMMON - imported}"


def test_all_is_every_component_set() -> None:
    every = set().union(*(_names(install_set(c)) for c in INSTALL_SETS if c != "all"))
    assert every <= RUNTIME
    assert RUNTIME - every == _names(_own_lines("all"))  # what only the stack layer adds


def test_no_dev_tool_is_a_runtime_dependency() -> None:
    assert not RUNTIME & {canonicalize_name(n) for n in DEV_TOOLS}
    assert EXTRAS["bench-model"] == {"keras-hub"}


def test_every_runtime_import_is_in_a_set_and_every_pin_is_imported() -> None:
    imported = _imports(_files(runtime=True))
    missing = {dist: files for dist, files in imported.items() if dist not in _closure(RUNTIME)}
    assert not missing, f"imported at runtime but in no component's set: {missing}"
    unused = {name for name in RUNTIME if name not in imported}
    assert not unused, f"runtime pins nothing imports (move them to another extra): {unused}"


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
    pins = list(PYPROJECT["project"]["dependencies"])
    pins += [line for extra in EXTRAS for line in _own_lines(extra)]
    for text in pins:
        req = Requirement(text)
        assert {str(s) for s in req.specifier} == {f"=={lock[canonicalize_name(req.name)]}"}, text
    unpinned = _closure(RUNTIME) - set(lock) - {"pip", "setuptools", "wheel"}  # as pip freeze
    assert not unpinned, f"runtime distributions requirements.lock does not pin: {unpinned}"


def _stages() -> dict[str, tuple[str, list[str]]]:
    """Dockerfile stage -> (the stage or image it starts from, its instructions, one a line)."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    stages: dict[str, tuple[str, list[str]]] = {}
    current: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        match = re.fullmatch(r"FROM (\S+) AS (\S+)", line)
        if match:
            current = []
            stages[match.group(2)] = (match.group(1), current)
        elif line and not line.startswith("#"):
            current.append(line)
    return stages


def _chain(stages: dict[str, tuple[str, list[str]]], name: str) -> list[str]:
    """The instructions of `name` and of every stage it starts from, the first stage's first."""
    lines: list[str] = []
    while name in stages:
        name, own = stages[name]
        lines = own + lines
    return lines


def _guard(stages: dict[str, tuple[str, list[str]]]) -> list[str]:
    """The COMPONENT values the Dockerfile's image stage accepts (its `case` guard)."""
    runs = " ".join(line for line in stages[IMAGE_STAGE][1] if line.startswith("RUN "))
    match = re.search(r'case "\$COMPONENT" in ([\w|]+)\)', runs)
    assert match, "the image stage does not check its COMPONENT"
    return match.group(1).split("|")


def _image(stages: dict[str, tuple[str, list[str]]], component: str) -> list[str]:
    """The instructions that build `component`'s image, its build arg substituted."""
    arg = re.compile(r'"?\$\{?COMPONENT\}?"?')
    return [arg.sub(component, line) for line in _chain(stages, IMAGE_STAGE)]


def test_one_image_stage_installs_the_set_its_component_arg_names() -> None:
    stages = _stages()
    assert "ARG COMPONENT" in stages[IMAGE_STAGE][1]
    assert _guard(stages) == list(IMAGES)  # no other set (test, dev, stack, bench) builds
    for image in IMAGES:
        lines = _image(stages, image)
        runs = " ".join(line for line in lines if line.startswith("RUN "))
        sets = [args.split() for args in re.findall(r"scripts/requirements\.py([^>]*)>", runs)]
        extra = INSTALL_SETS[image].extra
        assert sets == [[]] + ([[extra]] if extra else []), (image, sets)
        installs = re.findall(r"pip install ([^&]*)", runs)
        assert installs, image
        for args in installs:
            assert "-r /tmp/set.txt -c requirements.lock" in args or "--no-deps /wheel/" in args
        assert "requirements.lock" not in re.sub(r"-c requirements\.lock|COPY .*", "", runs)
        assert "[" not in runs, f"{image} installs an extra by name"
        assert lines[-1] == 'ENTRYPOINT ["tokenpulse"]', image


def _writable_volumes(service: dict) -> set[str]:
    """Where a compose service mounts a named volume it may write."""
    targets = set()
    for mount in service.get("volumes", []):
        if isinstance(mount, str):
            source, target, *flags = mount.split(":")
            mount = {"source": source, "target": target, "read_only": "ro" in flags}
        if not mount["source"].startswith((".", "/", "$")) and not mount.get("read_only"):
            targets.add(mount["target"])
    return targets


def test_every_image_runs_as_an_unprivileged_user_owning_the_paths_it_writes() -> None:
    """Kubernetes' restricted level needs a non-root user it can check: a numeric USER."""
    lines = _chain(_stages(), IMAGE_STAGE)
    users = [line for line in lines if line.startswith("USER ")]
    assert users == [f"USER {RUNTIME_UID}:{RUNTIME_UID}"], users
    after = lines[lines.index(users[0]) + 1 :]
    assert not [line for line in after if line.startswith(("RUN ", "COPY "))], after
    created = re.findall(
        rf"install -d -o {RUNTIME_UID} -g {RUNTIME_UID} ((?:/[\w/-]+ ?)+)", " ".join(lines)
    )
    owned = {path for paths in created for path in paths.split()}
    assert f"useradd --uid {RUNTIME_UID} --gid {RUNTIME_UID}" in " ".join(lines)
    # a fresh named volume takes the image's owner: each one a project service writes must exist
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    ours = [s for s in services.values() if "build" in s or s["image"].startswith("tokenpulse-")]
    written = set().union(*(_writable_volumes(s) for s in ours))
    assert written, "no compose service writes a named volume"
    assert written <= owned, written - owned


def test_no_stage_copies_the_development_tools_or_tests() -> None:
    stages = _stages()
    copies = [
        line.split()[1:-1]
        for _, lines in stages.values()
        for line in lines
        if line.startswith("COPY ") and "--from=" not in line
    ]
    sources = {source for line in copies for source in line}
    packages = sorted(s for s in sources if (ROOT / s / "__init__.py").is_file())
    assert packages == sorted(RUNTIME_PACKAGES)
    assert sources - set(packages) == {
        "requirements.lock", "pyproject.toml", "scripts/requirements.py", "README.md",
    }  # fmt: skip
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {"devtools/", "tests/"} <= set(ignored)
    assert {".venv", ".git", "models/", "run/", ".cache/", "**/__pycache__"} <= set(ignored)


def test_each_compose_service_runs_its_component_image() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    stages = _stages()
    built = {name: svc for name, svc in services.items() if "build" in svc}
    assert {"model-build", "gateway", "exporter", "shipper", "setup", "oncall-receiver"} <= set(
        built
    )
    for name, svc in built.items():
        assert svc["build"]["target"] == IMAGE_STAGE and IMAGE_STAGE in stages, name
        component = svc["build"]["args"]["COMPONENT"]
        assert component in IMAGES, name
        assert svc["build"]["context"] == "."
        version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
        assert svc["image"] == f"tokenpulse-{component}:{version}", name
        assert svc["command"][0] in INSTALL_SETS[component].commands, (name, component)


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
