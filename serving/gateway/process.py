"""Start `tokenpulse gateway` as a subprocess on a loopback port (used by tests and the bench)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenpulse.procs import free_port, stop_process


class GatewayStartError(RuntimeError):
    """The gateway exited or never answered /healthz."""


@dataclass
class GatewayProcess:
    """A running gateway subprocess."""

    url: str
    pid: int
    port: int
    process: subprocess.Popen[bytes] = field(repr=False)
    stderr_path: Path = field(repr=False)
    started_in_s: float = 0.0  # spawn → first /healthz 200

    def stderr(self) -> str:
        """What the gateway logged so far (JSON lines)."""
        return self.stderr_path.read_text(errors="replace")

    def access_logs(self) -> list[dict[str, Any]]:
        """Parsed access-log lines."""
        out = []
        for line in self.stderr().splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("message") == "request":
                out.append(doc)
        return out

    def rss_bytes(self) -> int:
        """Resident set size now (Linux)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=0.5) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


@contextlib.contextmanager
def running_gateway(
    upstream_url: str,
    keys_file: Path,
    *,
    start_timeout_s: float = 30.0,
    env: dict[str, str] | None = None,
    **settings: Any,
) -> Iterator[GatewayProcess]:
    """Run a gateway against `upstream_url` until the block ends; `settings` are GatewaySettings."""
    port = free_port()
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPULSE_GATEWAY_")}
    child_env.update(env or {})
    child_env["PYTHONUNBUFFERED"] = "1"
    child_env["TOKENPULSE_GATEWAY_PORT"] = str(port)
    child_env["TOKENPULSE_GATEWAY_UPSTREAM_URL"] = upstream_url
    child_env["TOKENPULSE_GATEWAY_KEYS_FILE"] = str(keys_file)
    for name, value in settings.items():
        encoded = json.dumps(value) if isinstance(value, list | dict | bool) else str(value)
        child_env[f"TOKENPULSE_GATEWAY_{name.upper()}"] = encoded
    with tempfile.TemporaryDirectory(prefix="tp-gateway-") as tmp:
        stderr_path = Path(tmp) / "stderr.log"
        started = time.perf_counter()
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tokenpulse.cli", "gateway"],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=child_env,
                start_new_session=True,
            )
        gw = GatewayProcess(
            url=f"http://127.0.0.1:{port}", pid=proc.pid, port=port, process=proc,
            stderr_path=stderr_path,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + start_timeout_s
            while not _healthy(gw.url):
                if proc.poll() is not None:
                    raise GatewayStartError(
                        f"gateway exited with {proc.returncode}:\n{gw.stderr()[-4000:]}"
                    )
                if time.monotonic() > deadline:
                    raise GatewayStartError(f"gateway not healthy after {start_timeout_s:.0f}s")
                time.sleep(0.02)
            gw.started_in_s = time.perf_counter() - started
            yield gw
        finally:
            stop_process(proc)
