"""CPU seconds of local processes from /proc (Linux): the one reading the load test's server
view and the benches' CPU-per-request figures share."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def cpu_seconds(pid: int, main_thread: bool = False) -> float:
    """CPU seconds the process (or only its main thread, e.g. an event loop) has used so far.

    Each live thread's `schedstat` counts nanoseconds; `stat`'s utime + stime count clock ticks
    (10 ms), which a short phase can round down to 0, so ticks are only the fallback (they also
    count threads that have exited, which schedstat loses). OSError when the process is gone."""
    proc = Path(f"/proc/{pid}")
    tasks = [proc / "task" / str(pid)] if main_thread else list((proc / "task").iterdir())
    total_ns = 0
    for task in tasks:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError, IndexError):
            total_ns += int((task / "schedstat").read_text().split()[0])
    if total_ns:
        return total_ns / 1e9
    stat = (tasks[0] if main_thread else proc) / "stat"
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
