"""Small helpers for the processes the stack, benchmarks and tests start on loopback."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Protocol

# Listening ports come from below the kernel's ephemeral range (32768-60999 on Linux), which
# every outgoing connection draws its source port from: a port the kernel picked with bind(0)
# was taken by some client's connection before the server bound it, under a loaded parallel
# suite ("Address already in use"). Randomised, so parallel processes rarely pick the same one.
_LISTEN_PORTS = (20000, 32768)
_handed_out: set[int] = set()
# A port is free when picked but bound only when its component starts, up to a stack's start-up
# later (`up` picks every port first): another process picking meanwhile could take the same one
# (a parallel suite's `up --ha` lost prometheus-2's port so). Each pick leaves a marker here, and a
# port whose marker is younger than this is skipped by every process on the machine.
_MARKERS = Path(tempfile.gettempdir()) / "tokenpulse-ports"
_MARKER_TTL_S = 600.0


def _claim(port: int) -> bool:
    """Mark `port` as handed out, machine-wide; False when a process did so recently."""
    marker = _MARKERS / str(port)
    try:
        _MARKERS.mkdir(mode=0o1777, exist_ok=True)
    except OSError:
        return True  # no place for markers (a read-only /tmp, a file in the way): the bind test
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    except FileExistsError:
        try:
            if time.time() - marker.lstat().st_mtime < _MARKER_TTL_S:
                return False
            # an old claim: this process's now (a race here costs one retry); a link planted in
            # the shared directory is touched itself, never what it points at
            os.utime(marker, follow_symlinks=False)
        except OSError:
            return False
        return True
    except OSError:
        return True  # the directory refuses a marker (another user's, without write access)
    os.close(fd)
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1, below the ephemeral range, that was free a moment ago and that
    no process on this machine handed out in the last ten minutes."""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(*_LISTEN_PORTS)
        if port in _handed_out or not _claim(port):
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # a crowded range: any port
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ChildProcess(Protocol):
    """What a started component is watched and stopped through: a `subprocess.Popen`, or a
    child forked by stack.zygote."""

    pid: int

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...


def stop_process(proc: ChildProcess, timeout_s: float = 15.0) -> None:
    """SIGTERM, wait for a clean exit, then SIGKILL if it does not come."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout_s)


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
