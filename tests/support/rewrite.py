"""`make test`'s assertion rewrite ahead of the run (the Makefile's REWRITTEN): pytest rewrites each
test module's asserts before importing it and keeps the result beside its bytecode only where
bytecode may be written, so one collection with that allowed leaves it for every worker to read.
One collection took 11.7 s of a fresh clone's run while the second core idled; two, each over
about half of the test files by size, side by side, take the two cores.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tokenpulse.paths import ROOT


def halves(tests: Path) -> tuple[list[Path], list[Path]]:
    """The entries of `tests` (folders and top-level test files) in two groups of about equal size:
    the largest first, each to the smaller group so far."""

    def size(entry: Path) -> int:
        files = entry.rglob("*.py") if entry.is_dir() else [entry]
        return sum(f.stat().st_size for f in files)

    entries = [e for e in tests.iterdir() if e.is_dir() and e.name != "__pycache__"
               or e.name.startswith("test_") and e.suffix == ".py"]  # fmt: skip
    groups: tuple[list[Path], list[Path]] = ([], [])
    totals = [0, 0]
    for entry, n in sorted(((e, size(e)) for e in entries), key=lambda pair: -pair[1]):
        smaller = totals.index(min(totals))
        groups[smaller].append(entry)
        totals[smaller] += n
    return groups


def main() -> int:
    """Collect both halves at once, bytecode writes allowed; their outcome is the run's to say."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    runs = [
        subprocess.Popen(
            [*argv, *map(str, half)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for half in halves(ROOT / "tests")
        if half
    ]
    for run in runs:
        run.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
