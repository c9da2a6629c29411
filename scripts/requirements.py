"""Print pyproject's common dependencies plus the named extras, one requirement a line.

`make up` installs these (constrained by requirements.lock) instead of the whole lock, so the local
stack gets what it uses and no test or dev tools: `python scripts/requirements.py all stack`. Each
image installs its component's set the same way (`python scripts/requirements.py gateway`).
An extra that names the project's own extras (`tokenpulse[model,gateway]`) is expanded in place,
so pip never looks for `tokenpulse` on an index. Standard library only: it runs in a bare venv and
in the images' build stage, before anything is installed.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
# `name[extra, ...]` with no version: how an extra names other extras of its own project
SELF_REFERENCE = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*\[([^\]]*)\]\s*")


def _normalized(name: str) -> str:
    """A project name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(extras: list[str], pyproject: Path = PYPROJECT) -> list[str]:
    """Common dependencies, then each extra's, self-references expanded, each line once.

    An unknown extra is an error.
    """
    project = tomllib.loads(pyproject.read_text())["project"]
    own = _normalized(project["name"])
    table: dict[str, list[str]] = project.get("optional-dependencies", {})
    out: list[str] = []
    seen_extras: set[str] = set()

    def add(lines: list[str]) -> None:
        for line in lines:
            match = SELF_REFERENCE.fullmatch(line)
            if match and _normalized(match.group(1)) == own:
                for name in match.group(2).split(","):
                    expand(name.strip())
            elif line not in out:
                out.append(line)

    def expand(name: str) -> None:
        if name in seen_extras:
            return
        if name not in table:
            raise SystemExit(f"requirements.py: no extra {name!r} in {pyproject.name}")
        seen_extras.add(name)
        add(table[name])

    add(list(project["dependencies"]))
    for name in extras:
        expand(name)
    return out


if __name__ == "__main__":
    sys.stdout.write("".join(f"{line}\n" for line in requirements(sys.argv[1:])))
