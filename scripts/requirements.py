"""Print pyproject's runtime dependencies plus the named extras, one requirement a line.

`make up` installs these (constrained by requirements.lock) instead of the whole lock, so the local
stack gets what it uses and no test or dev tools: `python scripts/requirements.py stack`.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def requirements(extras: list[str]) -> list[str]:
    """Runtime dependencies, then each extra's; an unknown extra is an error."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    out = list(project["dependencies"])
    for name in extras:
        if name not in project["optional-dependencies"]:
            raise SystemExit(f"requirements.py: no extra {name!r} in pyproject.toml")
        out += project["optional-dependencies"][name]
    return out


if __name__ == "__main__":
    sys.stdout.write("".join(f"{line}\n" for line in requirements(sys.argv[1:])))
