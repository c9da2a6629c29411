"""CPU seconds of local processes from /proc: the whole process, or its main thread only."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from stack.loadtest.procstat import cpu_seconds

# a second thread burns half a second of CPU and stays alive; the main thread waits
BUSY_THREAD = """
import threading, time
burnt = threading.Event()
def burn():
    end = time.thread_time() + 0.5
    while time.thread_time() < end:
        pass
    burnt.set()
    time.sleep(60)
threading.Thread(target=burn, daemon=True).start()
burnt.wait()
print("done", flush=True)
input()
"""


def test_cpu_seconds_counts_work_done_and_the_main_thread_apart() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", BUSY_THREAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    ) as proc:  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline() == "done\n"
        whole, main = cpu_seconds(proc.pid), cpu_seconds(proc.pid, main_thread=True)
        proc.communicate("\n")
    assert 0.4 <= whole < 5
    assert main < whole - 0.3  # the burning was another thread's


def test_a_process_that_is_gone_is_an_oserror() -> None:
    with subprocess.Popen([sys.executable, "-c", "pass"]) as proc:
        proc.wait()
    with pytest.raises(OSError):
        cpu_seconds(proc.pid)
    assert cpu_seconds(os.getpid()) > 0
