"""RUN_DIR/stack.json: what a running `tokenpulse up` is, for the commands that act on it.

`up` writes it once every component is healthy and again whenever a component is restarted
(new pid), and removes it when it stops. `tokenpulse drill` and `tokenpulse soak` read it to find
the ports, the pids (to kill or sample one), the rule set and the restart delay: the stack's
StackConfig (stack/config.py, every value resolved), its pids and `up`'s own pid. Nothing secret
is in it (no keys), and it is private like the rest of the run directory.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stack.config import StackConfig
from tokenpulse.atomic import atomic_write

STATE_FILE = "stack.json"


class NoRunningStack(RuntimeError):
    """No `tokenpulse up` is running on this run directory."""


@dataclass(frozen=True)
class StackState:
    """The running stack as the drills and the soak see it: its config and its processes."""

    config: StackConfig
    up_pid: int
    pids: dict[str, int]  # component name -> pid of its current process

    def url(self, port_field: str, path: str = "") -> str:
        """http://127.0.0.1:<port><path> for one of the port settings."""
        return self.config.url(port_field, path)

    def path(self, name: str) -> Path:
        """A file under the run directory."""
        return self.config.path(name)

    def to_json(self) -> dict[str, Any]:
        """What stack.json holds."""
        return {"up_pid": self.up_pid, "pids": self.pids, "config": self.config.to_json()}

    @classmethod
    def from_json(cls, doc: Any) -> StackState:
        """The state `to_json` wrote; ValueError naming what does not fit."""
        try:
            return cls(StackConfig.from_json(doc["config"]), int(doc["up_pid"]), dict(doc["pids"]))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"missing or malformed {exc}") from exc


def write_state(state: StackState) -> Path:
    """Write RUN_DIR/stack.json atomically (a reader never sees half a file)."""
    path = state.path(STATE_FILE)
    atomic_write(path, json.dumps(state.to_json(), indent=2, sort_keys=True) + "\n", 0o600)
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
        state = StackState.from_json(doc)
    except ValueError as exc:
        raise NoRunningStack(f"{path} is not a stack state: {exc}") from exc
    if not _alive(state.up_pid):
        raise NoRunningStack(f"the stack of {run_dir} is gone (up pid {state.up_pid}): {hint}")
    return state
