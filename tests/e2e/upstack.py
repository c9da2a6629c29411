"""`tokenpulse up` as a newcomer runs it, driven from a test: start, read the banner, stop.

The stack runs in its own folder on free loopback ports, with the time-compressed rules, 2 s
scrapes, short Alertmanager timings, the fake GPU backend and a short restart delay, so an
outage drill takes a minute or two. Whatever happens, leaving the block stops every process.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from devtools.traffic import steady_traffic
from stack import zygote
from stack.up.banner import READY_LINE
from stack.up.settings import PORT_FIELDS
from tests.support.modelserver import MODELSERVER_TEST_ENV
from tokenpulse.procs import free_port

# the test stack's pace (stack/profiles.py: compressed rules, fast scrapes and polls, fake GPUs, a
# canary run every 5 s besides the one each new AVAILABLE version gets at once)
STACK_FLAGS = ("--profile=test", "--canary-weight=0.3", "--restart-delay-s=20")
START_TIMEOUT_S = 420.0


@dataclass
class UpStack:
    """A running `tokenpulse up` and what its banner said."""

    proc: subprocess.Popen[str]
    workdir: Path
    ports: dict[str, int]
    output: list[str] = field(default_factory=list)

    @property
    def banner(self) -> str:
        return "".join(self.output)

    def url(self, port_field: str) -> str:
        return f"http://127.0.0.1:{self.ports[port_field]}"

    @property
    def run_dir(self) -> Path:
        return self.workdir / "run"

    @property
    def key(self) -> str:
        return (self.run_dir / "demo-key.txt").read_text().strip()

    def pids(self) -> dict[str, int]:
        """Component -> pid of its current process: the banner's table, then any restart."""
        table = re.findall(r"^  ([\w-]+) +http\S* +pid (\d+) ", self.banner, re.M)
        table += re.findall(r"^([\w-]+) restarted \(pid (\d+)\)", self.banner, re.M)
        return {name: int(pid) for name, pid in table}

    def snippet(self, start: str) -> str:
        """The banner's command starting with `start`, up to the blank line after it."""
        text = self.banner
        begin = text.index(start)
        return text[begin : text.index("\n\n", begin)]

    def generate(
        self, prompt: str, max_tokens: int = 4, key: str | None = None, stream: bool = False
    ) -> httpx.Response:
        """One completion (streamed: the whole SSE body, read to its end)."""
        body = {"model": "gen", "prompt": prompt, "max_tokens": max_tokens, "stream": stream}
        return httpx.post(
            f"{self.url('gateway_port')}/v1/completions",
            json=body,
            headers={"Authorization": f"Bearer {key or self.key}"},
            timeout=60,
        )

    @contextlib.contextmanager
    def traffic(self, rps: float = 2.0, stream_every: int = 0) -> Iterator[list[int]]:
        """Steady requests for the block, every `stream_every`-th one streamed (0: none); yields
        the status codes seen (0: no answer)."""
        sent = itertools.count(1)

        def one() -> httpx.Response:
            n = next(sent)
            return self.generate(
                "steady traffic", stream=bool(stream_every) and n % stream_every == 0
            )

        with steady_traffic(one, rps, "up-traffic") as codes:
            yield codes

    def notifications(self) -> list[dict[str, Any]]:
        path = self.run_dir / "oncall.jsonl"
        if not path.is_file():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def read_until(self, needle: str, timeout_s: float) -> None:
        """Collect output lines until one contains `needle`; AssertionError with the output."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while not any(needle in line for line in self.output):
            line = self.proc.stdout.readline()
            if not line and self.proc.poll() is not None:
                raise AssertionError(f"up exited with {self.proc.returncode}:\n{self.banner}")
            self.output.append(line)
            if time.monotonic() > deadline:
                raise AssertionError(f"no {needle!r} after {timeout_s:.0f}s:\n{self.banner}")

    def interrupt(self, timeout_s: float = 90.0) -> int:
        """Ctrl-C, then the exit code; the rest of the output is collected."""
        self.proc.send_signal(signal.SIGINT)
        out, _ = self.proc.communicate(timeout=timeout_s)
        self.output.append(out)
        return int(self.proc.returncode)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def alive(pids: list[int]) -> list[int]:
    """The pids still running."""
    return [p for p in pids if _alive(p)]


@contextlib.contextmanager
def running_up(workdir: Path, *extra: str, env: dict[str, str]) -> Iterator[UpStack]:
    """`tokenpulse up` in `workdir` (models under workdir/models), started as a background job
    with SIGINT ignored, as a non-interactive shell would; killed with every child on exit."""
    ports = {name: free_port() for name in PORT_FIELDS}
    argv = [sys.executable, "-m", "stack.cli", "up", *STACK_FLAGS, *extra]
    # its own training runs only (drills start them), never the checkout's
    argv.append(f"--training-cache-dir={workdir / 'training'}")
    argv += [f"--{name.replace('_', '-')}={port}" for name, port in ports.items()]
    env = {**env, **MODELSERVER_TEST_ENV}  # callers leave the suite's TOKENPULSE_ settings out
    if zygote.SOCKETS_VARIABLE in os.environ:  # but `up` forks from the run's zygotes too
        env[zygote.SOCKETS_VARIABLE] = os.environ[zygote.SOCKETS_VARIABLE]
    proc = subprocess.Popen(
        argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # noqa: PLW1509
    )  # fmt: skip
    stack = UpStack(proc, workdir, ports)
    try:
        stack.read_until(READY_LINE, START_TIMEOUT_S)
        yield stack
    finally:
        started = list(stack.pids().values())
        if proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                stack.interrupt()
        for pid in alive(started):  # whatever happened, leave nothing behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
