"""tokenpulse.paths names the repository's paths; the tree asks it instead of counting parents."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tokenpulse import paths

NAMES = [n for n, v in vars(paths).items() if n.isupper() and isinstance(v, Path)]
# the ways to climb from a file to the repository: parents[N], or .parent more than once
PARENTS = re.compile(r"Path\(__file__\)(\.resolve\(\))?\.(parents\[\d\]|parent\.parent)")
# Files that still count parents, each with why; a new one fails the test below.
KEPT = {
    "tokenpulse/paths.py": "the one place that does",
    "scripts/requirements.py": "runs in a bare venv and in the image's first stage",
    "tests/tokenpulse/test_paths.py": "the examples the pattern is tested on",
}
LATER = {  # issue 31 item 6: the gateway's tests are being rewritten elsewhere; takes paths.ROOT
    "tests/serving/gateway/test_cli.py",
}


@pytest.mark.parametrize("name", NAMES)
def test_each_path_exists_in_a_checkout(name: str) -> None:
    path = getattr(paths, name)
    assert path.exists(), f"paths.{name} = {path} does not exist"
    assert path == paths.ROOT or paths.ROOT in path.parents


def test_the_runbooks_sit_beside_the_rules_they_document() -> None:
    assert paths.RUNBOOKS == paths.ALERTS / "runbooks"
    assert any(paths.RUNBOOKS.glob("TokenPulse*.md"))


@pytest.mark.parametrize(
    "line",
    ["ROOT = Path(__file__).resolve().parents[2]", "ROOT = Path(__file__).parents[1]",
     "ROOT = Path(__file__).resolve().parent.parent"],
)  # fmt: skip
def test_the_pattern_finds_each_way_to_count_parents(line: str) -> None:
    assert PARENTS.search(line)
    assert not PARENTS.search('DATA = Path(__file__).with_name("data.yaml")')


def test_no_module_counts_parents_of_its_own_file_for_a_repository_path() -> None:
    found = set()
    for package in ("tokenpulse", "serving", "exporter", "log_pipeline", "monitoring", "stack",
                    "devtools", "scripts", "tests"):  # fmt: skip
        for file in (paths.ROOT / package).rglob("*.py"):
            if PARENTS.search(file.read_text(encoding="utf-8")):
                found.add(file.relative_to(paths.ROOT).as_posix())
    assert found - KEPT.keys() - LATER == set(), "use tokenpulse.paths (add a name if it lacks one)"
    assert LATER <= found, f"done, drop from LATER: {sorted(LATER - found)}"
