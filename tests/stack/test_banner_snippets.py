"""The banner's snippets work in the venv `make up` builds, not only in the test venv.

The venv comes from the Makefile's own target (`make VENV=<tmp>/.venv stack-venv`, the stamp `up`
depends on): the runtime set plus the `stack` extra, no test extras. The snippets are `try_it`'s,
the text the banner prints, run from a directory whose `.venv` is that venv, against a gateway in
front of the TF Serving stand-in.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from devtools.standins.tfserving import TfServingStandin
from serving.gateway.keys import add_key
from stack.launch import running_gateway
from stack.up.banner import VENV_PYTHON, try_it
from tokenpulse.paths import ROOT

ANSWER = "hello world (v1)"  # the stand-in's reply to any prompt
BUILD_TIMEOUT_S = 1500  # a cold pip cache downloads TensorFlow


def _clean_env() -> dict[str, str]:
    """This environment without the test venv: not on PATH, no make or Python variables."""
    ours = {str(Path(sys.prefix) / "bin"), str(ROOT / ".venv" / "bin")}
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p not in ours]
    drop = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, "PATH": os.pathsep.join(path)}


@pytest.fixture(scope="session")
def up_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding `.venv` as `make up` builds it; one build per run, xdist workers too."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by the workers of this run
    root = base / "up-checkout"
    root.mkdir(exist_ok=True)
    venv = root / ".venv"
    with (base / "up-checkout.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the others wait, then find the stamp and do nothing
        # without the bytecode compile (UV_COMPILE=, ~20 CPU-s): the set and the snippets are
        # what this checks, and the snippets' few processes would not earn it back
        done = subprocess.run(
            ["make", "-C", str(ROOT), f"VENV={venv}", "UV_COMPILE=", "stack-venv"],
            env=_clean_env(), capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
        )  # fmt: skip
    assert done.returncode == 0, (
        f"make stack-venv failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    )
    return root


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(url, demo key) of a gateway in front of the TF Serving stand-in."""
    keys_file = tmp_path_factory.mktemp("banner-keys") / "keys.json"
    key = add_key(keys_file, "demo")
    with TfServingStandin() as standin, running_gateway(standin.url, keys_file) as gw:
        yield gw.url, key


def _run_as_printed(snippet: str, checkout: Path) -> str:
    """Paste `snippet` into bash at the root of `checkout`; its stdout."""
    done = subprocess.run(
        ["bash", "-c", snippet],
        cwd=checkout, env=_clean_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"{snippet}\nfailed with {done.returncode}:\n{done.stderr}"
    return done.stdout


def test_the_stack_extra_pins_what_the_banner_uses_at_the_lock_versions() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    stack: dict[str, str] = {canonicalize_name(Requirement(r).name): r for r in extras["stack"]}
    assert {"openai", "tensorboard"} <= set(stack)
    test: dict[str, str] = {canonicalize_name(Requirement(r).name): r for r in extras["test"]}
    assert stack["openai"] == test["openai"]  # the same pin as the `test` extra, not a second one
    lock = {
        canonicalize_name(name): version
        for name, _, version in (
            line.partition("==") for line in (ROOT / "requirements.lock").read_text().splitlines()
        )
    }
    for text in stack.values():
        req = Requirement(text)
        assert str(req.specifier) == f"=={lock[canonicalize_name(req.name)]}", text


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 300)
def test_the_up_venv_has_the_stack_set_and_not_the_test_tools(up_checkout: Path) -> None:
    python = up_checkout / VENV_PYTHON
    probe = (
        "import importlib.util as u; print(*[bool(u.find_spec(m)) for m in ('openai', 'pytest')])"
    )
    done = subprocess.run(
        [str(python), "-c", probe], env=_clean_env(), capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.split()) == (0, ["True", "False"]), done.stderr


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_printed_curl_command_answers(tmp_path: Path, gateway: tuple[str, str]) -> None:
    curl, _ = try_it(*gateway)
    body = json.loads(_run_as_printed(curl, tmp_path))  # curl needs no venv
    assert body["object"] == "text_completion" and body["choices"][0]["text"] == ANSWER


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 300)
def test_the_printed_openai_sdk_command_answers_in_the_up_venv(
    up_checkout: Path, gateway: tuple[str, str]
) -> None:
    _, sdk = try_it(*gateway)
    assert sdk.startswith(f"{VENV_PYTHON} - <<'EOF'\n")  # the venv `make up` built, not ours
    assert _run_as_printed(sdk, up_checkout).strip() == ANSWER
