"""RUN_DIR/stack.json: what a running `tokenpulse up` is, for the commands that act on it.

`up` writes it once every component is healthy and again whenever a component is restarted
(new pid), and removes it when it stops. `tokenpulse drill` and `tokenpulse soak` read it to find
the ports, the pids (to kill or sample one), the rule set and the restart delay; nothing secret is
in it (no keys), and it is private like the rest of the run directory.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = "stack.json"


class NoRunningStack(RuntimeError):
    """No `tokenpulse up` is running on this run directory."""


@dataclass(frozen=True)
class StackState:
    """The running stack as the drills and the soak see it."""

    run_dir: str
    up_pid: int
    ports: dict[str, int]
    pids: dict[str, int]  # component name -> pid of its current process
    rules: str  # normal | compressed
    restart_delay_s: float
    models_dir: str
    model: str
    group_wait: str
    group_interval: str
    evaluation_interval: str
    fault_proxy_port: int = 0
    es_url: str = ""  # Elasticsearch itself (the shipper may reach it through a fault proxy)
    es_fault_proxy_port: int = 0  # drills: the proxy between the shipper and es_url
    gpu_backend: str = "off"
    extra: dict[str, Any] = field(default_factory=dict)
    # `up --ha`: prometheus-2 and alertmanager-2 run too (their pids and ports are above)
    ha: bool = False

    def url(self, port_field: str, path: str = "") -> str:
        """http://127.0.0.1:<port><path> for one of the port settings."""
        return f"http://127.0.0.1:{self.ports[port_field]}{path}"

    def path(self, name: str) -> Path:
        """A file under the run directory."""
        return Path(self.run_dir) / name


def write_state(state: StackState) -> Path:
    """Write RUN_DIR/stack.json atomically (a reader never sees half a file)."""
    path = Path(state.run_dir) / STATE_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2, sort_keys=True) + "\n")
    tmp.chmod(0o600)
    os.replace(tmp, path)
    return path


def remove_state(run_dir: Path, up_pid: int) -> None:
    """Forget the stack `up_pid` ran (it stopped); another up's file stays (a second `up` on
    the same run directory stops at the port check and must not orphan the first)."""
    path = run_dir / STATE_FILE
    try:
        if json.loads(path.read_text()).get("up_pid") == up_pid:
            path.unlink()
    except (OSError, ValueError):
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_state(run_dir: Path) -> StackState:
    """The running stack of `run_dir`; NoRunningStack naming what to do when there is none."""
    path = run_dir / STATE_FILE
    hint = f"start one with `tokenpulse up --run-dir {run_dir}`"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise NoRunningStack(f"no running stack in {run_dir} ({path} is missing): {hint}") from exc
    except ValueError as exc:
        raise NoRunningStack(f"{path} is not JSON: {exc}") from exc
    try:
        state = StackState(**doc)
    except TypeError as exc:
        raise NoRunningStack(f"{path} is not a stack state: {exc}") from exc
    if not _alive(state.up_pid):
        raise NoRunningStack(f"the stack of {run_dir} is gone (up pid {state.up_pid}): {hint}")
    return state
