"""Sampling profiles of a benched process with py-spy, summarised as top entries.

py-spy launches the process it profiles (`wrap_argv()` goes before the command line): attaching by
pid needs /proc/<pid>/maps of another process, which sandboxes such as gVisor do not show. It
samples the Python stacks of every thread that is not idle; time in C code (aiohttp's parser,
orjson, grpc's core) counts against the Python frame that called it. A raw (collapsed stacks) file
is read back into:

- `self`: the frames the CPU was in, by function;
- `inclusive`: the functions on the stack, by function (a function appears once per sample);
- `areas`: self time by where the code lives (the HTTP server, the upstream client, JSON, ...).

A sample taken while the process imports a module (an import-machinery frame on its stack) is
start-up, not serving: it is counted in `importing` and left out of the rest. py-spy records from
the launch on, and a short bench's profile was otherwise mostly imports (72 % of 189 samples for
`bench gateway`'s smallest run), its top inclusive entries the import machinery.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>.*?)(?::\d+)?\)$")
# the file py-spy names for the import system's frames (`<frozen importlib._bootstrap>` and
# `..._bootstrap_external>`): a sample with one on its stack was taken during an import
_IMPORTING = "<frozen importlib._bootstrap"

# (area, substrings of a frame's file path); first match wins, checked in order
AREAS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gateway code", ("serving/gateway/",)),
    ("tokenpulse foundation", ("tokenpulse/",)),
    ("aiohttp client", ("aiohttp/client", "aiohttp/connector", "aiohttp/tracing")),
    ("aiohttp server", ("aiohttp/web", "aiohttp/http_", "aiohttp/base_protocol")),
    ("aiohttp shared", ("aiohttp/", "multidict/", "yarl/")),
    ("grpc", ("grpc/", "grpc\\", "_cython/_cygrpc")),
    ("json", ("json/", "orjson")),
    ("pydantic", ("pydantic",)),
    ("prometheus_client", ("prometheus_client/",)),
    ("logging", ("structlog/", "logging/")),
    ("event loop", ("asyncio/", "uvloop", "selectors.py")),
)


def pyspy() -> str | None:
    """The py-spy executable (this venv's, else PATH's), or None when it is not installed."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else shutil.which("py-spy")


def wrap_argv(out: Path, rate: int = 250) -> list[str]:
    """The py-spy prefix that profiles a launched command and its subprocesses into `out`."""
    exe = pyspy()
    if exe is None:
        raise FileNotFoundError("py-spy is not installed (pip install py-spy)")
    # --nonblocking: read the stacks without pausing the target (less overhead, rarely torn)
    return [
        exe, "record", "--format", "raw", "--output", str(out), "--rate", str(rate),
        "--subprocesses", "--nonblocking", "--",
    ]  # fmt: skip


def children(pid: int) -> list[int]:
    """Pids whose parent is `pid` (read from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry))
    return sorted(found)


def wait_child(pid: int, timeout_s: float = 10.0) -> int:
    """The first child of `pid` (the profiled process under a py-spy wrapper)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = children(pid)
        if found:
            return found[0]
        time.sleep(0.02)
    raise TimeoutError(f"process {pid} started no child within {timeout_s:g}s")


def stop_profiled(wrapper: int, target: int, out: Path, timeout_s: float = 30.0) -> None:
    """SIGTERM the profiled process and wait until py-spy has written `out` after it exited."""
    os.kill(target, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if out.is_file() and out.stat().st_size > 0 and not Path(f"/proc/{wrapper}").exists():
            return
        try:
            os.waitpid(wrapper, os.WNOHANG)  # reap it if it is ours
        except ChildProcessError:
            pass
        if out.is_file() and out.stat().st_size > 0 and _zombie_or_gone(wrapper):
            return
        time.sleep(0.05)


def _zombie_or_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def area_of(path: str) -> str:
    """Which `AREAS` entry a frame's file belongs to ("other" when none)."""
    for name, needles in AREAS:
        if any(n in path for n in needles):
            return name
    return "other"


@dataclass
class Profile:
    """Sample counts of one profile."""

    samples: int = 0
    importing: int = 0  # samples taken while the process imported a module: start-up, left out
    self: Counter[str] = field(default_factory=Counter)
    inclusive: Counter[str] = field(default_factory=Counter)
    areas: Counter[str] = field(default_factory=Counter)

    def top(self, which: str, n: int) -> list[tuple[float, str]]:
        """The `n` largest entries of `self`, `inclusive` or `areas`, as (share, name)."""
        counts: Counter[str] = getattr(self, which)
        return [(c / max(self.samples, 1), name) for name, c in counts.most_common(n)]

    def as_dict(self, n: int = 15) -> dict[str, object]:
        """JSON-ready top entries."""
        return {
            "samples": self.samples,
            "importing_samples": self.importing,
            **{
                which: [[round(share, 4), name] for share, name in self.top(which, n)]
                for which in ("self", "inclusive", "areas")
            },
        }


def _short(func: str, path: str) -> str:
    for marker in ("site-packages/", "/work/main/", "python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{func} ({path})"


def parse_raw(text: str) -> Profile:
    """A py-spy raw (collapsed stacks: `frame;frame;... count`) file as a Profile."""
    prof = Profile()
    for line in text.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = []
        for raw in stack.split(";"):
            m = _FRAME.match(raw)
            frames.append((m["func"], m["file"]) if m else (raw, ""))
        if frames and frames[0][0].startswith("process ") and not frames[0][1]:
            frames = frames[1:]  # --subprocesses puts the pid first
        if frames and frames[0][0].startswith("thread ") and not frames[0][1]:
            frames = frames[1:]
        if not frames:
            continue
        if any(path.startswith(_IMPORTING) for _, path in frames):
            prof.importing += count
            continue
        prof.samples += count
        func, path = frames[-1]
        prof.self[_short(func, path)] += count
        prof.areas[area_of(path)] += count
        for name in {_short(f, p) for f, p in frames}:
            prof.inclusive[name] += count
    return prof


def report(prof: Profile, n: int = 15) -> list[str]:
    """Printable lines: areas, then top self and inclusive functions, as shares of samples."""
    lines = [
        f"profile: {prof.samples} samples of the gateway's busy threads (py-spy), "
        f"{prof.importing} more while it imported its modules (left out)"
    ]
    for which, title in (
        ("areas", "self time by area"),
        ("self", "top functions by self time"),
        ("inclusive", "top functions by inclusive time"),
    ):
        lines.append(f"  {title}:")
        lines += [f"    {100 * share:5.1f}%  {name}" for share, name in prof.top(which, n)]
    return lines
