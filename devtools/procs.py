"""Process helpers only tests and benches need."""

from __future__ import annotations

from pathlib import Path


def child_pids(pid: int) -> list[int]:
    """Ids of the processes whose parent is `pid` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue  # gone since the listing
    return found
