"""The commands in the runbooks (alerts/runbooks/*.md), as the runbook tests read them.

The convention, for every runbook (also ones written later):
- a ```sh block holds commands for the local stack (`tokenpulse up`): each line that starts with
  `tokenpulse `, `curl ` or `amtool ` is run by tests/alerts/test_runbook_commands.py against a
  running stack, with the default ports of tokenpulse/ports.py mapped onto that stack's;
- a ```sh compose block holds the compose deployment's variant; it is not run, but
  tests/test_compose.py checks that each host port it uses is published and each
  `docker compose <verb> <service>` names a service;
- a `docker ...` line in a plain ```sh block is compose-only too, and checked the same way;
- placeholders are `<name>`, filled from PLACEHOLDERS; a runnable line with another fails the test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUNBOOKS = Path(__file__).resolve().parents[2] / "alerts" / "runbooks"
RUNNABLE = ("tokenpulse ", "curl ", "amtool ")
_BLOCK = re.compile(r"^```(sh(?: compose)?)\n(.*?)^```", re.M | re.S)
PLACEHOLDER = re.compile(r"<([a-z][a-z _-]*)>")
# what a placeholder stands for when the test runs a line (the test stack serves version 1)
PLACEHOLDERS = {
    "version": "1",
    "model": "gen",
    "uuid": "GPU-00000000-0000-0000-0000-000000000000",
    "output": "elasticsearch",
    "collector": "nvml",
    "who": "runbook-test",
    "ticket or incident": "runbook test",
}
HOST_URL = re.compile(r"(?:127\.0\.0\.1|localhost):(\d+)")


@dataclass(frozen=True)
class Command:
    """One command line of a runbook."""

    runbook: str
    line: str
    compose: bool  # the compose variant (not run locally)


def _lines(block: str) -> list[str]:
    out: list[str] = []
    pending = ""
    for raw in block.splitlines():
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        line = (pending + raw).strip()
        pending = ""
        if line and not line.startswith("#"):
            out.append(line)
    return out


def commands(path: Path) -> list[Command]:
    """Every command line of one runbook's shell blocks."""
    out = []
    for info, block in _BLOCK.findall(path.read_text()):
        for line in _lines(block):
            compose = info == "sh compose" or line.startswith("docker ")
            out.append(Command(path.stem, line, compose))
    return out


def all_commands() -> list[Command]:
    """Every runbook's command lines, runbooks in name order."""
    return [c for path in sorted(RUNBOOKS.glob("*.md")) for c in commands(path)]


def runnable(cmds: list[Command]) -> list[Command]:
    """The local lines the test runs."""
    return [c for c in cmds if not c.compose and c.line.startswith(RUNNABLE)]


def code(line: str) -> str:
    """The line without its trailing shell comment (a `#` outside quotes, after a blank)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line


def fill(line: str) -> str:
    """The command of a line, comment dropped, placeholders filled; KeyError names an unknown."""
    return PLACEHOLDER.sub(lambda m: PLACEHOLDERS[m[1]], code(line))
