"""Process helpers: free ports and stopping a process that ignores SIGTERM."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tokenpulse import procs
from tokenpulse.procs import free_port, stop_process


def test_free_port_can_be_bound() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_stop_process_kills_what_ignores_sigterm() -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print(1, flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline()  # handler installed
    stop_process(proc, timeout_s=0.5)
    assert proc.returncode == -9
    stop_process(proc)  # already gone: a no-op


def test_free_ports_stay_out_of_the_ephemeral_range_and_do_not_repeat() -> None:
    """Outgoing connections take their source ports from the ephemeral range, so a listening
    port picked there can be gone before the server binds it."""
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(20000 <= p < 32768 for p in ports)


def test_a_port_another_process_picked_lately_is_not_picked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three processes picking at once (stacks of a parallel suite) get different ports, though
    none binds its own (without the claims some 15 of the 900 were shared)."""
    monkeypatch.setattr(procs, "_MARKERS", tmp_path / "tokenpulse-ports")
    env = dict(os.environ, TMPDIR=str(tmp_path))  # the claims where this process reads them
    code = "from tokenpulse.procs import free_port; print([free_port() for _ in range(300)])"
    runs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    picked = [set(json.loads(run.communicate(timeout=60)[0])) for run in runs]
    mine = {free_port() for _ in range(300)}
    assert len(picked[0] | picked[1] | mine) == 900


def test_a_claim_older_than_ten_minutes_is_given_out_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(procs, "_MARKERS", tmp_path)
    monkeypatch.setattr(procs, "_handed_out", set())  # what this worker's other tests picked
    low = _bindable_pair()
    monkeypatch.setattr(procs, "_LISTEN_PORTS", (low, low + 2))
    (tmp_path / str(low)).touch()  # picked by another process a moment ago
    old = tmp_path / str(low + 1)
    old.touch()
    os.utime(old, (time.time() - 700, time.time() - 700))  # and one picked eleven minutes ago
    assert procs.free_port() == low + 1
    assert procs.free_port() not in (low, low + 1)  # both taken now: the kernel's pick


def test_a_file_where_the_claims_go_leaves_the_bind_test_not_the_kernels_pick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # left by some other tool, or planted in the shared /tmp: no claims, but ports still come from
    # below the ephemeral range, not from the kernel's fallback pick among client ports
    (tmp_path / "tokenpulse-ports").write_text("not a directory")
    monkeypatch.setattr(procs, "_MARKERS", tmp_path / "tokenpulse-ports")
    ports = [procs.free_port() for _ in range(20)]
    assert all(procs._LISTEN_PORTS[0] <= p < procs._LISTEN_PORTS[1] for p in ports)


def _bindable_pair() -> int:
    """The lower of two adjacent free ports below the ephemeral range."""
    for port in range(24000, 32000, 2):
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
        except OSError:
            continue
        return port
    raise AssertionError("no two adjacent free ports")
