"""The slim images' install sets, installed for real: each into a fresh venv, run and sized.

The Dockerfile's slim images install the common dependencies plus their component's extra at
requirements.lock's pins, then the project's wheel with --no-deps; each venv here is built the same
way (no Docker engine needed), the component's commands run from its `tokenpulse` entry point,
every module they reach imports, and site-packages is held to a size target. The anchor is
dcgm-exporter, the GPU sidecar people already deploy: about 1.45 GB uncompressed (Ubuntu image,
NVIDIA/dcgm-exporter pull request #228, "reduce image size from ~2GB to 1.45GB"). Our GPU
exporter's set is to stay a small fraction of that. The image itself adds python:3.11-slim's own
size (roughly 130 MB uncompressed; approximate, it varies by patch release) to each set.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from scripts.requirements import requirements
from tests.test_packaging import (
    INSTALL_SETS,
    SLIM,
    TF_MODULES,
    _closure,
    _names,
    component_roots,
    install_set,
    reach,
)
from tokenpulse.paths import ROOT

MB = 1_000_000
TARGET_MB = {"gateway": 150, "shipper": 150, "exporter": 100, "oncall": 100}
ANCHOR = "dcgm-exporter image: ~1450 MB uncompressed (NVIDIA/dcgm-exporter PR #228)"
INSTALL_TIMEOUT_S = 600

pytestmark = pytest.mark.slow


def _clean_env() -> dict[str, str]:
    """This environment without the test venv's variables (PATH keeps the system's tools)."""
    drop = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"}
    ours = str(Path(sys.prefix) / "bin")
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p != ours]
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "PATH": os.pathsep.join(path)}


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        argv, capture_output=True, text=True, env=_clean_env(), cwd="/", timeout=timeout
    )
    assert done.returncode == 0, f"{argv}\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done


def _site_packages(venv: Path) -> Path:
    (site,) = venv.glob("lib/python3.*/site-packages")
    return site


def _size(path: Path) -> int:
    """Bytes under `path` (apparent sizes, as an image layer holds them)."""
    return sum(f.lstat().st_size for f in path.rglob("*") if f.is_file() or f.is_symlink())


def _installed_size(dists: set[str]) -> int:
    """Bytes the distributions' RECORDs list in this (the test) venv."""
    total = 0
    for name in dists:
        for file in md.distribution(name).files or []:
            located = Path(str(file.locate()))
            if located.is_file():
                total += located.stat().st_size
    return total


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built once, as the Dockerfile's `wheel` stage builds it."""
    out = tmp_path_factory.mktemp("images-wheel")
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        timeout=300,
    )
    (built,) = out.glob("tokenpulse-*.whl")
    return built


@pytest.fixture(scope="session")
def component_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Callable[[str], Path]:
    """component -> a fresh venv holding its set and the project (built once per session)."""
    built: dict[str, Path] = {}

    def get(component: str) -> Path:
        if component not in built:
            venv = tmp_path_factory.mktemp(f"set-{component}") / "venv"
            # No pip inside: site-packages holds the set and nothing else; this venv's pip
            # installs into it (`pip --python`).
            _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120)
            reqs = venv.parent / "requirements.txt"
            reqs.write_text("".join(f"{line}\n" for line in install_set(component)))
            pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
            lock = str(ROOT / "requirements.lock")
            _run([*pip, "install", "-q", "-r", str(reqs), "-c", lock], timeout=INSTALL_TIMEOUT_S)
            _run([*pip, "install", "-q", "--no-deps", str(wheel)], timeout=120)
            built[component] = venv
        return built[component]

    return get


@pytest.mark.parametrize("component", SLIM)
def test_each_slim_set_runs_its_commands_and_imports_no_tensorflow(
    component: str, component_venv: Callable[[str], Path]
) -> None:
    venv = component_venv(component)
    for command in INSTALL_SETS[component].commands:
        out = _run([str(venv / "bin" / "tokenpulse"), command, "--help"], timeout=120).stdout
        assert out.startswith(f"usage: tokenpulse {command}"), out[:200]
    modules, _ = reach(component_roots(component))
    probe = (
        "import importlib, importlib.util, sys\n"
        f"for name in {sorted(modules)!r}:\n"
        "    importlib.import_module(name)\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {sorted(TF_MODULES)!r})\n"
        "print(loaded, importlib.util.find_spec('tensorflow') is None)\n"
    )
    out = _run([str(venv / "bin" / "python"), "-c", probe], timeout=120).stdout
    assert out.split("\n")[0] == "[] True", out


def test_the_slim_sets_meet_their_size_targets(
    component_venv: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    sizes = {c: _size(_site_packages(component_venv(c))) for c in SLIM}
    # The TensorFlow sets for comparison, from this venv's installed files (not installed anew).
    heavy = {
        c: _installed_size(_closure(_names(install_set(c))) - {"pip", "setuptools"})
        for c in ("model", "all")
    }
    common = requirements([])  # pyproject's common dependencies
    rows = [f"{'set':<9} {'installs':<48} {'MB':>7}  target"]
    for component, size in {**sizes, **heavy}.items():
        added = [Requirement(r).name for r in install_set(component) if r not in common]
        what = (
            f"common + {', '.join(added)}"
            if added
            else "common (" + ", ".join(Requirement(r).name for r in common) + ")"
        )
        what = what if len(what) <= 48 else what[:45] + "..."
        target = f"<= {TARGET_MB[component]}" if component in TARGET_MB else "- (this venv's files)"
        rows.append(f"{component:<9} {what:<48} {size / MB:7.1f}  {target}")
    rows.append(f"anchor: {ANCHOR}")
    table = "\n".join(rows)
    with capsys.disabled():
        print(f"\n{table}")
    over = {c: round(s / MB, 1) for c, s in sizes.items() if s > TARGET_MB[c] * MB}
    assert not over, f"sets over their targets: {over}\n{table}"
    assert heavy["model"] > 5 * max(sizes.values()), table  # the split is what makes them slim
