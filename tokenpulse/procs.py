"""Small helpers for the processes the stack, benchmarks and tests start on loopback."""

from __future__ import annotations

import random
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

# Listening ports come from below the kernel's ephemeral range (32768-60999 on Linux), which
# every outgoing connection draws its source port from: a port the kernel picked with bind(0)
# was taken by some client's connection before the server bound it, under a loaded parallel
# suite ("Address already in use"). Randomised, so parallel processes rarely pick the same one.
_LISTEN_PORTS = (20000, 32768)
_handed_out: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1, below the ephemeral range, that was free a moment ago and that
    this process has not handed out before."""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(*_LISTEN_PORTS)
        if port in _handed_out:
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


def stop_process(proc: subprocess.Popen[Any], timeout_s: float = 15.0) -> None:
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
