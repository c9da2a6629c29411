"""Every runbook's local commands run against a running stack: exit 0, sane output.

The lines come from tests/support/runbooks.py's convention (```sh local blocks; lines starting
with `tokenpulse `, `curl ` or `amtool `; `<placeholders>` from its table), so a runbook added
later is run too. The compose and Kubernetes variants beside them are checked against what those
deployments publish and name (test_runbook_compose.py, test_runbook_kubernetes.py). Each line
runs in bash as a user would type it (a pipe's status is its last command's: `curl ... | grep X`
fails when curl gets nothing; a curl line must print something). The default
ports the runbooks name (tokenpulse/ports.py) are mapped onto the shared test stack's free ports;
`tokenpulse rollout` and `samples` find the stack through their environment variables, as they
would find `run/` under `tokenpulse up`. A silence a runbook adds is expired right after; labels,
history and the canary weight are put back at the end.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from devtools.stack import Stack, wait_until
from stack.config import Ports
from stack.rollout.labels import ModelsConfig
from stack.rollout.settings import CANARY_WEIGHT_FILE
from tests.support.runbooks import HOST_URL, RUNBOOKS, all_commands, fill, runnable
from tokenpulse.paths import ROOT

COMMANDS = runnable(all_commands())
NAMES = sorted({c.runbook for c in COMMANDS})
DEFAULT_PORTS = {f.default: f.name for f in fields(Ports)}
# commands that change the stack: run one at a time, in runbook order
MUTATES = re.compile(r"tokenpulse rollout (label|rollback|canary-weight)|amtool .*silence add")


class Runner:
    """Runs runbook lines against the stack (each distinct command once)."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        ports = stack.config.ports
        self.ports = {str(d): str(getattr(ports, name)) for d, name in DEFAULT_PORTS.items()}
        self.env = dict(
            os.environ,
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            TOKENPULSE_ROLLOUT_RUN_DIR=str(stack.workdir),
            TOKENPULSE_ROLLOUT_GATEWAY_URL=stack.gateway.url,
            TOKENPULSE_ROLLOUT_WAIT_S="15",
            TOKENPULSE_SAMPLES_SQLITE_PATH=str(stack.workdir / "samples.db"),
        )
        self.done: dict[str, subprocess.CompletedProcess[str]] = {}
        self.silences: list[str] = []

    def local(self, line: str) -> str:
        """The command with the stack's ports instead of the defaults."""

        def port(m: re.Match[str]) -> str:
            if m[1] not in self.ports:
                pytest.fail(f"the local stack listens on no port {m[1]}: {line}")
            return m[0].replace(m[1], self.ports[m[1]])

        return HOST_URL.sub(port, fill(line))

    def run(self, line: str) -> subprocess.CompletedProcess[str]:
        command = self.local(line)
        if command in self.done and "rollout rollback" not in command:
            return self.done[command]
        if "rollout rollback" in command:
            self._stable_history()
        result = self._exec(command)
        if " silence add " in f" {command} " and result.returncode == 0:
            self.silences.append(result.stdout.strip())
        self.done[command] = result
        return result

    def prefetch(self, lines: list[str]) -> None:
        """Run the commands that change nothing side by side (the others run in order later; a
        line naming a port the stack lacks fails in its runbook's test, not here)."""
        known = [line for line in lines if set(HOST_URL.findall(fill(line))) <= set(self.ports)]
        ready = {c for line in known if not MUTATES.search(c := self.local(line))}
        with ThreadPoolExecutor(max_workers=4) as pool:
            for command, result in zip(ready, pool.map(self._exec, ready), strict=True):
                self.done[command] = result

    def _exec(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", command], cwd=ROOT, env=self.env,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    def _stable_history(self) -> None:
        # the test stack serves version 1 only: record "stable was 1", so rollback has a target
        config = ModelsConfig.read(self.stack.config.models_config)
        config.history = {"gen": {"stable": [config.labels("gen")["stable"]]}}
        config.write()

    def expire_silences(self) -> None:
        am = self.stack.alertmanager_url
        for silence in self.silences:
            subprocess.run(
                ["amtool", f"--alertmanager.url={am}", "silence", "expire", silence],
                check=True, capture_output=True, timeout=30,
            )  # fmt: skip
        self.silences.clear()


@pytest.fixture(scope="module")
def runner(shared_stack: Stack) -> Iterator[Runner]:
    for _ in range(3):  # samples, request counters and per-version series to look at
        assert shared_stack.generate().status_code == 200
    # a sample the shipper stores on its own poll: the read-only commands, which start side by
    # side at once, wait for that first delivery
    assert shared_stack.refused().status_code == 422
    store = shared_stack.workdir / "samples.db"
    wait_until(store.exists, timeout_s=90, what=f"the shipper's first delivery to {store}")
    models_config = shared_stack.config.models_config
    before = models_config.read_bytes()
    weight = shared_stack.workdir / CANARY_WEIGHT_FILE
    had_weight = weight.exists()
    r = Runner(shared_stack)
    r.prefetch([c.line for c in COMMANDS])
    try:
        yield r
    finally:
        r.expire_silences()
        models_config.write_bytes(before)
        if not had_weight:
            weight.unlink(missing_ok=True)


def _expected_labels() -> dict[str, set[str]]:
    """alertname -> the labels its promtool tests expect on it (alerts/tests/*.yml)."""
    out: dict[str, set[str]] = {}
    for path in (ROOT / "alerts" / "tests").glob("*.yml"):
        for test in yaml.safe_load(path.read_text()).get("tests", []):
            for case in test.get("alert_rule_test", []):
                for alert in case.get("exp_alerts") or []:
                    got = out.setdefault(case["alertname"], set())
                    got |= set(alert.get("exp_labels", {}))
    return out


def test_silence_matchers_are_labels_the_alert_carries() -> None:
    carried = _expected_labels()
    bad = []
    for command in COMMANDS:
        words = shlex.split(fill(command.line))
        if "silence" not in words or "add" not in words:
            continue
        matchers = dict(w.split("=", 1) for w in words if re.fullmatch(r"[a-z_]+=.+", w))
        assert matchers.get("alertname") == command.runbook, command.line
        unknown = set(matchers) - {"alertname"} - carried.get(command.runbook, set())
        bad += [f"{command.runbook}: no label {name}" for name in sorted(unknown)]
    assert bad == []


def test_every_runbook_has_commands_the_test_runs() -> None:
    assert {p.stem for p in RUNBOOKS.glob("*.md")} - set(NAMES) <= {"Watchdog"}


@pytest.mark.parametrize("name", NAMES)
def test_runbook_commands_run_on_the_local_stack(runner: Runner, name: str) -> None:
    failed = []
    for command in (c for c in COMMANDS if c.runbook == name):
        result = runner.run(command.line)
        out, err = result.stdout, result.stderr
        if result.returncode != 0:
            failed.append(f"{command.line}\n  exit {result.returncode}: {err.strip()[-300:]}")
        elif command.line.startswith("curl ") and not out.strip():
            failed.append(f"{command.line}\n  printed nothing")
        elif "rollout status" in command.line and "AVAILABLE versions: 1" not in out:
            failed.append(f"{command.line}\n  {out}")
        elif " silence add " in f" {command.line} " and not re.fullmatch(r"[0-9a-f-]{36}\n", out):
            failed.append(f"{command.line}\n  no silence id: {out!r}")
    runner.expire_silences()
    assert failed == [], "\n".join(failed)
