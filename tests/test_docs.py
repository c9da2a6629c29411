"""Docs a user can follow: nothing in the repository cites files a user of it does not have."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tokenpulse.paths import ROOT

# Built from parts so this file does not match itself.
CITATION = re.compile("|".join(["\\.\\./shared/", "DESIGN" + "\\.md", "REFERENCE" + "\\.md"]))
SUFFIXES = {".md", ".py", ".yml", ".yaml", ".toml", ".txt", ".config", ".sh", ".json", ".csv"}


def _project_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    files = [ROOT / name for name in listed]
    return [f for f in files if f.is_file() and (f.suffix in SUFFIXES or f.name == "Makefile")]


def test_no_file_cites_design_notes_outside_the_repository() -> None:
    cited = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _project_files()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if CITATION.search(line)
    ]
    assert not cited, f"state the fact instead of citing notes users do not have: {cited}"
