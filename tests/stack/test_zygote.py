"""stack.zygote: a component forked from the zygote is set up as an exec'd one is (session, stdin,
output, working directory, environment, command line, exit code); what a fork cannot honour is
exec'd; a zygote that goes away leaves its children running and is replaced."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stack import launch, zygote
from stack.launch import http_ok, running_process, tokenpulse_argv, wait_until
from tokenpulse.procs import free_port

ENV = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")


@pytest.fixture(scope="module")
def forker() -> Iterator[zygote.Zygote]:
    z = zygote.Zygote(ENV)
    yield z
    z.close()


def _cmdline(pid: int) -> list[str]:
    words = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    while words and not words[-1]:
        words.pop()
    return words


def _environ(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    return dict(p.split("=", 1) for p in pairs if "=" in p)


def _receiver(port: int, notes: Path) -> list[str]:
    return ["oncall-receiver", f"--port={port}", f"--file={notes}"]


def test_a_forked_component_is_set_up_as_an_exec_one(
    forker: zygote.Zygote, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    port, log = free_port(), tmp_path / "receiver.log"
    # the port comes from the environment the launch gives, which the zygote never had
    args = ["oncall-receiver", f"--file={tmp_path / 'notes.jsonl'}"]
    env = ENV | {"TOKENPULSE_ONCALL_PORT": str(port)}
    with open(log, "ab") as out:
        child = forker.spawn(args, env, out.fileno())
    try:
        wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/healthz"), 60, "the receiver")
        assert os.getsid(child.pid) == child.pid != os.getsid(forker.process.pid)
        assert os.readlink(f"/proc/{child.pid}/fd/0") == os.devnull
        assert os.readlink(f"/proc/{child.pid}/fd/1") == str(log)
        assert os.readlink(f"/proc/{child.pid}/fd/2") == str(log)
        assert os.readlink(f"/proc/{child.pid}/cwd") == str(tmp_path)
        assert _cmdline(child.pid) == [sys.executable, "-m", "stack.cli", *args]
        # nothing of the zygote is left open in the child: only its three streams and what the
        # receiver opened itself (its listening socket, its epoll)
        assert not any(
            os.readlink(f"/proc/{child.pid}/fd/{fd}").startswith(("socket:", "pipe:"))
            and fd in (forker._control.fileno(),)
            for fd in map(int, os.listdir(f"/proc/{child.pid}/fd"))
        )
        assert child.poll() is None
    finally:
        child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=15) == 0
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert lines and all(line.get("component") == "oncall" for line in lines)


def test_exit_codes_and_deaths_come_back_as_popen_reports_them(
    forker: zygote.Zygote, tmp_path: Path
) -> None:
    with open(tmp_path / "log", "ab") as out:
        refused = forker.spawn(["oncall-receiver", "--port=-3"], ENV, out.fileno())
        assert refused.wait(timeout=30) == 2  # a bad flag: the CLI's one error line, exit 2
        assert "error" in (tmp_path / "log").read_text()
        port = free_port()
        killed = forker.spawn(_receiver(port, tmp_path / "n"), ENV, out.fileno())
    wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/healthz"), 60, "the receiver")
    with pytest.raises(subprocess.TimeoutExpired):
        killed.wait(timeout=0.2)
    killed.kill()
    assert killed.wait(timeout=15) == -signal.SIGKILL
    killed.kill()  # known dead: its pid is not signalled again


def test_what_a_fork_cannot_honour_is_exec_d(tmp_path: Path) -> None:
    port = free_port()
    argv = tokenpulse_argv(*_receiver(port, tmp_path / "n"))
    ready = lambda: http_ok(f"http://127.0.0.1:{port}/healthz")  # noqa: E731
    with running_process(argv, ready, what="receiver") as child:
        assert isinstance(child.process, zygote.ZygoteChild)
        assert _cmdline(child.pid) == argv
    # a variable Python reads at start-up, set otherwise than this process's zygote has it
    env = dict(os.environ, PYTHONHASHSEED="7")
    with running_process(argv, ready, what="receiver", env=env) as child:
        assert isinstance(child.process, subprocess.Popen)
        assert _environ(child.pid)["PYTHONHASHSEED"] == "7"
    # anything but `tokenpulse <command>` is exec'd as it always was
    with running_process(["sleep", "30"], lambda: True, what="sleep") as child:
        assert isinstance(child.process, subprocess.Popen)


def test_the_zygote_can_be_turned_off_and_a_bad_value_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    argv = tokenpulse_argv(*_receiver(port, tmp_path / "n"))
    ready = lambda: http_ok(f"http://127.0.0.1:{port}/healthz")  # noqa: E731
    monkeypatch.setenv("TOKENPULSE_ZYGOTE_ENABLED", "false")
    with running_process(argv, ready, what="receiver") as child:
        assert isinstance(child.process, subprocess.Popen)
    monkeypatch.setenv("TOKENPULSE_ZYGOTE_ENABLED", "sometimes")
    with pytest.raises(launch.LaunchError, match=r"^TOKENPULSE_ZYGOTE_ENABLED='sometimes' is not"):
        with running_process(argv, ready, what="receiver"):
            pass


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_children_outlive_their_zygote_and_a_gone_zygote_is_replaced(
    forker: zygote.Zygote, tmp_path: Path
) -> None:
    z = forker  # closed here, this module's last use of it
    port = free_port()
    with open(tmp_path / "log", "ab") as out:
        child = z.spawn(_receiver(port, tmp_path / "n"), ENV, out.fileno())
    wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/healthz"), 60, "the receiver")
    z.close()
    assert not z.alive() and http_ok(f"http://127.0.0.1:{port}/healthz")
    assert child.poll() is None  # still running, though nobody here can reap it
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(timeout=15) == -signal.SIGKILL
    # this process's own zygote, killed while its child runs: the child is stopped as usual
    # and the next launch forks from a new one
    ports = [free_port(), free_port()]
    argvs = [tokenpulse_argv(*_receiver(p, tmp_path / f"n{p}")) for p in ports]
    ready = [lambda p=p: http_ok(f"http://127.0.0.1:{p}/healthz") for p in ports]
    with running_process(argvs[0], ready[0], what="receiver", stop_timeout_s=5) as first:
        old = _parent(first.pid)
        os.kill(old, signal.SIGKILL)
        wait_until(lambda: not zygote._running(old), 15, "the zygote's end")
    assert first.process.returncode is not None and not zygote._running(first.pid)
    with running_process(argvs[1], ready[1], what="receiver") as second:
        assert isinstance(second.process, zygote.ZygoteChild)
        assert _parent(second.pid) not in (old, os.getpid())
