"""Process helpers: free ports and stopping a process that ignores SIGTERM."""

from __future__ import annotations

import socket
import subprocess
import sys

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
