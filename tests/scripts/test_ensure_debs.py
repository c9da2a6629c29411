"""scripts/ensure-debs.sh with a fake apt-get on a PATH of its own: nothing of the host changes.

The script sees only a temporary bin directory: the few real tools it uses, a fake `apt-get` (and
`sudo`) that record their arguments, and stubs for whichever Debian programs a test says exist.
Lock files are temporary files that a helper process locks the way apt does (fcntl).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenpulse.paths import ROOT

SCRIPT = ROOT / "scripts" / "ensure-debs.sh"
BASH = shutil.which("bash") or "/bin/bash"
TOOLS = ("awk", "env", "grep", "id", "sed", "sleep", "sort", "stat", "tr")  # what the script runs
EVERYTHING = ("prometheus", "prometheus-alertmanager", "promtool", "amtool", "docker-compose")
TCMALLOC = "libtcmalloc-minimal4"  # a library, not a program: known to dpkg only

# Locks `path` as apt does (a POSIX write lock), says so, and holds it until stdin closes.
HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


class Host:
    """A bin directory for the script, with fake apt-get and sudo recording into `calls`."""

    def __init__(self, root: Path) -> None:
        self.bin = root / "bin"
        self.bin.mkdir()
        self.calls = root / "calls"
        self.lock = root / "lock-frontend"
        self.lock.touch()
        for tool in TOOLS:
            real = shutil.which(tool)
            assert real, f"{tool} is not installed"
            (self.bin / tool).symlink_to(real)
        record = f'echo "$DEBIAN_FRONTEND|$*" >> {shlex.quote(str(self.calls))}'
        self._script("apt-get", record)
        self._script("sudo", 'exec "$@"')
        # dpkg-query -W -f=FORMAT PACKAGE: the status line of a package `packages` installed
        self.dpkg = root / "dpkg-installed"
        self.dpkg.touch()
        known = f'grep -qx "${{@: -1}}" {shlex.quote(str(self.dpkg))} || exit 1'
        self._script("dpkg-query", f"{known}\nprintf 'install ok installed'")

    def _script(self, name: str, body: str) -> None:
        path = self.bin / name
        path.write_text(f"#!{BASH}\n{body}\n")
        path.chmod(0o755)

    def installed(self, *programs: str) -> None:
        for name in programs:
            self._script(name, "exit 0")

    def packages(self, *names: str) -> None:
        with self.dpkg.open("a") as known:
            known.writelines(f"{name}\n" for name in names)

    def apt_calls(self) -> list[tuple[str, list[str]]]:
        """(DEBIAN_FRONTEND, arguments) of each apt-get run, in order."""
        if not self.calls.exists():
            return []
        lines = self.calls.read_text().splitlines()
        return [(env, args.split()) for env, _, args in (line.partition("|") for line in lines)]

    def env(self, **extra: str) -> dict[str, str]:
        return {"PATH": str(self.bin), "TOKENPULSE_APT_LOCKS": str(self.lock), **extra}

    def run(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [BASH, str(SCRIPT), *args],
            env=self.env(**extra), capture_output=True, text=True, timeout=60,
        )  # fmt: skip


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path)


@pytest.fixture
def holder(host: Host) -> Iterator[subprocess.Popen[str]]:
    """A process holding `host.lock` until the test closes its stdin (or ends)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(host.lock)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


@pytest.mark.parametrize("mode", ["all", "stack"])
def test_nothing_runs_and_nothing_is_said_when_every_program_exists(host: Host, mode: str) -> None:
    host.installed(*EVERYTHING if mode == "all" else ("prometheus", "alertmanager"))
    host.packages(TCMALLOC)
    done = host.run(mode)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert host.apt_calls() == []


@pytest.mark.parametrize(
    ("mode", "packages"),
    [
        ("all", ["docker-compose", TCMALLOC, "prometheus", "prometheus-alertmanager"]),
        ("stack", [TCMALLOC, "prometheus", "prometheus-alertmanager"]),
    ],
)
def test_update_and_install_both_wait_for_the_dpkg_lock(
    host: Host, mode: str, packages: list[str]
) -> None:
    done = host.run(mode, TOKENPULSE_APT_LOCK_TIMEOUT_S="42")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"installing Debian packages: {' '.join(packages)}\n"
    (_, update), (frontend, install) = host.apt_calls()
    timeout = ["-o", "DPkg::Lock::Timeout=42"]
    assert update == ["-q", *timeout, "update"]
    assert install == ["-q", *timeout, "install", "-y", "--no-install-recommends", *packages]
    assert frontend == "noninteractive"


def test_the_timeout_defaults_to_ten_minutes(host: Host) -> None:
    host.installed("prometheus")
    assert host.run("stack").returncode == 0
    assert all("DPkg::Lock::Timeout=600" in args for _, args in host.apt_calls())


def test_a_held_lock_is_waited_for_and_its_holder_named(
    host: Host, holder: subprocess.Popen[str], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with out.open("w") as sink:
        script = subprocess.Popen(
            [BASH, str(SCRIPT), "stack"], env=host.env(), stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 20
        while "waiting for" not in out.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        said = out.read_text()
        assert f"waiting for {host.lock} before apt-get update (up to 600s)" in said
        assert f"held by pid {holder.pid} ({sys.executable} -c" in said
        time.sleep(1.5)  # still held: apt-get must not have run
        assert script.poll() is None and host.apt_calls() == []
        assert holder.stdin is not None
        holder.stdin.close()  # the other apt is done
        assert script.wait(timeout=20) == 0
    finally:
        if script.poll() is None:
            script.kill()
    assert [args[-1] for _, args in host.apt_calls()] == ["update", "prometheus-alertmanager"]
    assert out.read_text().count("waiting for") == 1  # said once, not every second


def test_after_the_timeout_apt_get_runs_anyway_and_reports_the_lock_itself(
    host: Host, holder: subprocess.Popen[str]
) -> None:
    host.installed(*EVERYTHING[:-1])
    host.packages(TCMALLOC)
    started = time.monotonic()
    done = host.run(TOKENPULSE_APT_LOCK_TIMEOUT_S="1")
    assert done.returncode == 0, done.stderr
    assert "still locked after 1s; trying apt-get update anyway" in done.stdout
    assert "still locked after 1s; trying apt-get install anyway" in done.stdout
    assert [args[-1] for _, args in host.apt_calls()] == ["update", "docker-compose"]
    assert time.monotonic() - started < 15
