"""`tokenpulse up`: the whole local stack starts, the printed snippet works, Ctrl-C stops it all."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.models import install_version
from tokenpulse.procs import free_port

pytestmark = pytest.mark.slow


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_up_starts_the_stack_prints_a_working_curl_and_stops_on_ctrl_c(
    tmp_path: Path, tiny_export: Path
) -> None:
    install_version(tiny_export, tmp_path / "models" / "gen", 1)  # models.config: models/gen
    ports = {name: free_port() for name in ("grpc", "rest", "gateway", "exporter")}
    argv = [sys.executable, "-m", "tokenpulse.cli", "up", "--run-dir", str(tmp_path / "run")]
    for name, port in ports.items():
        argv += [f"--{name}-port", str(port)]
    # Started the way a non-interactive shell starts a background job, SIGINT ignored: Ctrl-C
    # must stop the stack all the same.
    proc = subprocess.Popen(
        argv,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # noqa: PLW1509
    )
    lines: list[str] = []
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 240
        assert proc.stdout is not None
        while not any("Ctrl-C stops everything" in line for line in lines):
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "".join(lines)
            lines.append(line)
            assert time.monotonic() < deadline, "".join(lines)
        banner = "".join(lines)
        pids += [int(p) for p in re.findall(r"\(pid (\d+)\)", banner)]
        assert len(pids) == 3
        curl = banner[banner.index("curl -sS") : banner.index("\n\n", banner.index("curl -sS"))]
        assert f"127.0.0.1:{ports['gateway']}" in curl
        key_file = tmp_path / "run" / "demo-key.txt"
        assert key_file.stat().st_mode & 0o077 == 0  # the demo key is private to its owner
        assert (
            key_file.read_text().strip() not in (tmp_path / "run" / "gateway-keys.json").read_text()
        )
        done = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=60)
        body = json.loads(done.stdout)
        assert body["object"] == "text_completion" and body["choices"][0]["finish_reason"]
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        finally:  # whatever happened, leave no process of the stack behind
            left = [pid for pid in pids if _alive(pid)]
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0
    assert not left
