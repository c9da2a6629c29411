"""The compose variant of every runbook names only what docker-compose.yml has: checked against
`docker-compose config` of docker-compose.yml with the GPU overlay (every service of the CPU
deployment and more). Each `docker compose <verb> <service>` names a service, each host port a
line uses is published, each URL inside a container names a service of the internal network;
`tokenpulse rollout` says `--deployment compose` and `tokenpulse samples` names an Elasticsearch
URL, since compose has neither the local stack's run directory nor its embedded store.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.runbooks import (
    HOST_URL,
    Command,
    all_commands,
    fill,
    simple_commands,
    tokenpulse_problems,
)
from tokenpulse.paths import ROOT

COMMANDS = all_commands()
SAMPLES_SIGN_IN = {"TOKENPULSE_SAMPLES_ES_USERNAME", "TOKENPULSE_SAMPLES_ES_PASSWORD"}

_COMPOSE_VERBS = {"logs", "restart", "ps", "exec", "run", "up", "stop", "start", "top", "kill"}


def _env_file(tmp_path: Path) -> Path:
    """.env.example with every required secret filled in, as an operator would."""
    lines = []
    for line in (ROOT / ".env.example").read_text().splitlines():
        if re.fullmatch(r"[A-Z_]+=", line):
            line += "x" * 32
        lines.append(line)
    path = tmp_path / "compose.env"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def compose(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """`docker-compose config` of the GPU deployment (every service of the CPU one and more)."""
    if shutil.which("docker-compose") is None:
        pytest.fail("docker-compose is not installed (make test installs it)")
    env_file = _env_file(tmp_path_factory.mktemp("compose"))
    argv = ["docker-compose", "--env-file", str(env_file), "-f", "docker-compose.yml",
            "-f", "docker-compose.gpu.yml", "config"]  # fmt: skip
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(out.stdout)


def _published(port: str | dict) -> str:
    """The host port of a `ports:` entry (`[IP:]HOST:CONTAINER[/proto]` or the long syntax)."""
    if isinstance(port, dict):
        return str(port["published"])
    return port.split("/")[0].split(":")[-2]


def _compose_call(words: list[str]) -> tuple[str, list[str], list[str]] | None:
    """(verb, services, command run inside) of a `docker compose ...` / `docker-compose ...`."""
    if words[:2] == ["docker", "compose"]:
        rest = words[2:]
    elif words[:1] == ["docker-compose"]:
        rest = words[1:]
    else:
        return None
    verb, args = rest[0], rest[1:]
    names: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word in ("--scale", "-e", "--env", "-u", "--user", "-w", "--workdir", "--tail"):
            if word == "--scale":
                names.append(args[i + 1].split("=")[0])
            i += 2
            continue
        if not word.startswith("-"):
            names.append(word)
            if verb in ("exec", "run"):
                return verb, names, args[i + 1 :]
        i += 1
    return verb, names, []


def _compose_problems(command: Command, compose: dict) -> list[str]:
    services = compose["services"]
    published = {_published(p) for s in services.values() for p in s.get("ports", [])}
    bad = []
    for words in simple_commands(fill(command.line)):
        call = _compose_call(words)
        inside: list[str] = []
        if call is not None:
            verb, names, inside = call
            if verb not in _COMPOSE_VERBS:
                bad.append(f"no compose verb {verb}")
            bad += [f"no service {name}" for name in names if name not in services]
            for host, port in re.findall(r"https?://([a-z][a-z0-9-]*):(\d+)", " ".join(inside)):
                if host not in services:  # the internal network's names are its services
                    bad.append(f"no service {host} (in {host}:{port})")
            if inside[:1] == ["tokenpulse"]:
                bad += tokenpulse_problems(inside, "compose")
            if inside[:3] == ["tokenpulse", "samples", "search"]:
                env = services.get(names[0], {}).get("environment", {})
                if not SAMPLES_SIGN_IN <= set(env):  # security is on: a search signs in
                    bad.append(f"service {names[0]} has no {sorted(SAMPLES_SIGN_IN)}")
            continue
        if words[:1] == ["tokenpulse"]:
            bad += tokenpulse_problems(words, "compose")
        for port in HOST_URL.findall(" ".join(words)):
            if port not in published:
                bad.append(f"port {port} is not published")
    return bad


def test_compose_lines_use_published_ports_and_real_services(compose: dict) -> None:
    bad = []
    for command in (c for c in COMMANDS if c.deployment == "compose"):
        bad += [
            f"{command.runbook}: {p}: {command.line}" for p in _compose_problems(command, compose)
        ]
    assert not bad, "\n".join(bad)


WRONG_COMPOSE = [
    ("curl -s http://127.0.0.1:8501/v1/models/gen", "port 8501 is not published"),
    ("tokenpulse rollout status", "lacks --deployment compose"),
    ("tokenpulse samples search --since 1h", "lacks --es-url"),
    ("docker compose exec -T shipper tokenpulse samples search --since 1h", "lacks --es-url"),
    ("docker compose logs --tail=10 tfservin", "no service tfservin"),
    (
        "docker compose exec gateway tokenpulse samples search --es-url http://elasticsearch:9200",
        "service gateway has no",
    ),
    ("docker compose exec gateway python -c \"print('http://tfservng:8501/')\"", "no service"),
]


@pytest.mark.parametrize(("line", "problem"), WRONG_COMPOSE, ids=[w[1] for w in WRONG_COMPOSE])
def test_a_wrong_compose_line_is_named(compose: dict, line: str, problem: str) -> None:
    found = _compose_problems(Command("X", line, "compose", "Mitigation"), compose)
    assert any(problem in p for p in found), found


RIGHT_COMPOSE = [
    "curl -s http://127.0.0.1:8080/readyz",
    "tokenpulse rollout status --deployment compose",
    "docker compose exec -T shipper tokenpulse samples search --es-url http://elasticsearch:9200",
    "docker compose ps tfserving && docker compose logs --tail=200 tfserving",
]


@pytest.mark.parametrize("line", RIGHT_COMPOSE)
def test_a_right_compose_line_passes(compose: dict, line: str) -> None:
    assert _compose_problems(Command("X", line, "compose", "Mitigation"), compose) == []
