"""scripts/requirements.py: an extra's requirement set, the project's own extras expanded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scripts.requirements import requirements
from tokenpulse.paths import ROOT

SCRIPT = ROOT / "scripts" / "requirements.py"

PYPROJECT = """
[project]
name = "Demo_Pkg"
dependencies = ["a==1", "b==2"]

[project.optional-dependencies]
x = ["c==3", "a==1"]
y = ["demo-pkg[x]", "d==4"]
z = ["Demo_Pkg [ y , x ]", "e==5"]
loop = ["demo-pkg[loop,x]"]
"""


@pytest.fixture
def pyproject(tmp_path: Path) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(PYPROJECT)
    return path


def test_the_common_set_then_each_extra_each_line_once(pyproject: Path) -> None:
    assert requirements([], pyproject) == ["a==1", "b==2"]
    assert requirements(["x"], pyproject) == ["a==1", "b==2", "c==3"]


def test_the_projects_own_extras_are_expanded_never_printed(pyproject: Path) -> None:
    assert requirements(["y"], pyproject) == ["a==1", "b==2", "c==3", "d==4"]
    assert requirements(["z"], pyproject) == ["a==1", "b==2", "c==3", "d==4", "e==5"]
    assert requirements(["loop"], pyproject) == ["a==1", "b==2", "c==3"]


def test_an_unknown_extra_is_an_error(pyproject: Path) -> None:
    with pytest.raises(SystemExit, match="no extra 'nope'"):
        requirements(["nope"], pyproject)
    with pytest.raises(SystemExit, match="no extra 'w'"):
        pyproject.write_text(PYPROJECT + 'v = ["demo-pkg[w]"]\n')
        requirements(["v"], pyproject)


def test_it_runs_on_the_standard_library_alone_and_prints_one_line_each() -> None:
    # -I -S: no site-packages, as in a bare venv or the images' first stage
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(SCRIPT), "all", "stack"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines == requirements(["all", "stack"])
    assert not [line for line in lines if line.lower().startswith("tokenpulse")]
    assert {"tensorflow==2.21.0", "aiohttp==3.14.5", "openai==3.57.0"} <= set(lines)
