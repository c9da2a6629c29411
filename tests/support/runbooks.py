"""The commands in the runbooks (alerts/runbooks/*.md), as the runbook tests read them.

The convention, for every runbook (also ones written later): every shell block names its
deployment, and the three come together, in this order, each after its label line:

    **Local** (`tokenpulse up`):            then a ```sh local block
    **Compose** (...):                      then a ```sh compose block
    **Kubernetes** (...):                   then a ```sh kubernetes block

- local lines that start with `tokenpulse `, `curl ` or `amtool ` are run by
  tests/alerts/test_runbook_commands.py against a running stack, with the default ports of
  tokenpulse/ports.py mapped onto that stack's;
- compose and Kubernetes lines are checked by tests/alerts/test_runbook_deployments.py against
  what those deployments publish and name (`docker-compose config`, the rendered overlays);
- a Kubernetes line whose comment says `cpu overlay` or `gpu overlay` holds for that overlay only;
- placeholders are `<name>`, filled from PLACEHOLDERS; a line with another fails the tests.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from stack.cli import build_parser
from tokenpulse.paths import RUNBOOKS

RUNNABLE = ("tokenpulse ", "curl ", "amtool ")
DEPLOYMENTS = ("local", "compose", "kubernetes")
# the line before each block: what a reader on call looks for
LABELS = {"local": "Local", "compose": "Compose", "kubernetes": "Kubernetes"}
_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.M | re.S)
_LABEL = re.compile(r"^\*\*(Local|Compose|Kubernetes)\*\* \(.+\):$")
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
    "node": "gpu-node-1",  # a Kubernetes node (never run: Kubernetes lines are checked only)
}
HOST_URL = re.compile(r"(?:127\.0\.0\.1|localhost):(\d+)")
OVERLAY_NOTE = re.compile(r"\b(cpu|gpu) overlay\b")


@dataclass(frozen=True)
class Command:
    """One command line of a runbook."""

    runbook: str
    line: str
    deployment: str  # local, compose or kubernetes
    section: str  # the `## ` heading it is under

    @property
    def overlays(self) -> tuple[str, ...]:
        """The Kubernetes overlays the line holds for (its comment may name one)."""
        named = OVERLAY_NOTE.findall(comment(self.line))
        return tuple(dict.fromkeys(named)) or ("cpu", "gpu")


@dataclass(frozen=True)
class Block:
    """One fenced shell block of a runbook, with its deployment and what precedes it."""

    runbook: str
    info: str  # the fence's info string: `sh local`, ...
    section: str
    label: str  # the last non-blank line before the fence ("" when none)
    lines: tuple[str, ...]

    @property
    def deployment(self) -> str:
        return self.info.removeprefix("sh ").strip()


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


def blocks(path: Path) -> list[Block]:
    """Every fenced shell block (info `sh...`) of one runbook."""
    text = path.read_text()
    out = []
    for m in _FENCE.finditer(text):
        if not m[1].startswith("sh"):
            continue
        before = text[: m.start()]
        headings = re.findall(r"^## (.+)$", before, re.M)
        prose = [line for line in before.splitlines() if line.strip()]
        label = prose[-1] if prose else ""
        section = headings[-1] if headings else ""
        out.append(Block(path.stem, m[1].strip(), section, label, tuple(_lines(m[2]))))
    return out


def label_of(block: Block) -> str:
    """The deployment its label line names ("" when the line is no label)."""
    m = _LABEL.match(block.label)
    return m[1].lower() if m else ""


def commands(path: Path) -> list[Command]:
    """Every command line of one runbook's shell blocks."""
    return [
        Command(b.runbook, line, b.deployment, b.section) for b in blocks(path) for line in b.lines
    ]


def all_commands() -> list[Command]:
    """Every runbook's command lines, runbooks in name order."""
    return [c for path in sorted(RUNBOOKS.glob("*.md")) for c in commands(path)]


def runnable(cmds: list[Command]) -> list[Command]:
    """The local lines the test runs."""
    return [c for c in cmds if c.deployment == "local" and c.line.startswith(RUNNABLE)]


def _split_comment(line: str) -> int:
    """Where the line's trailing shell comment starts (a `#` outside quotes, after a blank)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return i
    return len(line)


def code(line: str) -> str:
    """The line without its trailing shell comment."""
    return line[: _split_comment(line)].rstrip()


def comment(line: str) -> str:
    """The line's trailing shell comment ("" when none)."""
    return line[_split_comment(line) :]


def fill(line: str) -> str:
    """The command of a line, comment dropped, placeholders filled; KeyError names an unknown."""
    return PLACEHOLDER.sub(lambda m: PLACEHOLDERS[m[1]], code(line))


_SUBSHELL = re.compile(r"\$\(([^()]*)\)")


def simple_commands(line: str) -> list[list[str]]:
    """The simple commands of a filled line as words: split at |, ||, &&, ; and &, with each
    `$(...)` a command of its own (its place in the outer command a word `SUBSHELL`)."""
    inner = _SUBSHELL.findall(line)
    outer = _SUBSHELL.sub("SUBSHELL", line)
    lexer = shlex.shlex(outer, posix=True, punctuation_chars="|&;")
    lexer.whitespace_split = True
    parts: list[list[str]] = [[]]
    for token in lexer:
        if token in ("|", "||", "&&", ";", "&"):
            parts.append([])
        else:
            parts[-1].append(token)
    found = [p for p in parts if p]
    for sub in inner:
        found += simple_commands(sub)
    return found


def program(words: list[str]) -> str:
    """The program a simple command runs (after VAR=value assignments and `export`)."""
    rest = [w for w in words if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w)]
    if rest[:1] == ["export"]:
        return "export"
    return rest[0] if rest else ""


def tokenpulse_problems(words: list[str], deployment: str) -> list[str]:
    """A `tokenpulse ...` command: it parses, and it reaches this deployment's state."""
    args = words[1:]
    try:
        parsed = build_parser(args).parse_args(args)
    except SystemExit:
        return [f"`{' '.join(words)}` does not parse"]
    if parsed.command == "rollout" and getattr(parsed, "deployment", None) != deployment:
        return [f"`{' '.join(words)}` lacks --deployment {deployment}"]
    searches = parsed.command == "samples" and parsed.samples_command in ("search", "show")
    if searches and not getattr(parsed, "es_url", ""):
        return [f"`{' '.join(words)}` lacks --es-url (no embedded store on {deployment})"]
    return []
