"""stack.zygote: a component forked from the zygote is set up as an exec'd one is (session, stdin,
output, working directory, environment, command line, exit code); what a fork cannot honour is
exec'd; a zygote that goes away leaves its children running and is replaced."""

from __future__ import annotations

import functools
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
from tests.support.models import lifecycle_export
from tokenpulse.procs import free_port

ENV = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")


@pytest.fixture(scope="module")
def forker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[zygote.Zygote]:
    z = zygote.Zygote(ENV, "light", listen=tmp_path_factory.mktemp("zygote") / "light.sock")
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


def _fd_kinds(pid: int) -> list[str]:
    """What kind of thing each open descriptor is (a file, /dev/null, a socket, a pipe...)."""
    kinds = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        kinds.append(target if target == os.devnull else target.split(":")[0].split("/")[0])
    return sorted(kinds)


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
        # it holds what the same command exec'd holds, nothing of the zygote's
        exec_port = free_port()
        exec_env = env | {"TOKENPULSE_ONCALL_PORT": str(exec_port)}
        with open(tmp_path / "exec.log", "ab") as exec_out:
            exec_d = subprocess.Popen(tokenpulse_argv(*args), stdin=subprocess.DEVNULL,
                                      stdout=exec_out, stderr=exec_out, env=exec_env,
                                      start_new_session=True)  # fmt: skip
        try:
            wait_until(lambda: http_ok(f"http://127.0.0.1:{exec_port}/healthz"), 60, "exec'd")
            # (once both have closed their readiness checks' connections)
            same = lambda: _fd_kinds(child.pid) == _fd_kinds(exec_d.pid)  # noqa: E731
            wait_until(same, 10, "the same descriptors")
        finally:
            exec_d.kill()
            exec_d.wait()
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


def test_each_kind_carries_only_what_its_commands_load(tmp_path: Path) -> None:
    """A gateway forked must not map TensorFlow (nor get its SQLite, which lacks FTS5, under
    the shipper's store); a model server forked has it loaded already."""
    keys = tmp_path / "keys.json"
    keys.write_text('{"keys": []}')
    with launch.running_gateway("http://127.0.0.1:9", keys) as gw:
        assert isinstance(gw.process, zygote.ZygoteChild)
        maps = Path(f"/proc/{gw.pid}/maps").read_text()
        assert "tensorflow" not in maps and "_sqlite3" not in maps
        light = _parent(gw.pid)
    with launch.running_modelserver(lifecycle_export(tmp_path / "m" / "1").parent) as ms:
        assert isinstance(ms.process, zygote.ZygoteChild)
        assert "tensorflow" in Path(f"/proc/{ms.pid}/maps").read_text()
        assert _parent(ms.pid) != light
    assert zygote.kind_of("modelserver") == "tensorflow" and zygote.kind_of("shipper") == "light"


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


def test_other_processes_fork_from_a_listening_zygote(
    forker: zygote.Zygote, tmp_path: Path
) -> None:
    assert forker.listen is not None
    for _ in range(2):  # a connection that hangs up leaves the zygote serving the next
        connection = zygote.connect(forker.listen)
        assert connection.key == forker.key
        port = free_port()
        with open(tmp_path / "log", "ab") as out:
            child = connection.spawn(_receiver(port, tmp_path / "n"), ENV, out.fileno())
        url = f"http://127.0.0.1:{port}/healthz"
        wait_until(functools.partial(http_ok, url), 60, "the receiver")
        assert _parent(child.pid) == forker.process.pid
        child.terminate()
        assert child.wait(timeout=15) == 0
        connection.close()
    with pytest.raises(zygote.ZygoteError, match="^no zygote at "):
        zygote.connect(tmp_path / "nothing.sock", timeout_s=0.5)
    # a wrong folder (a careless TOKENPULSE_ZYGOTE_SOCKETS) is no zygote at once
    with pytest.raises(zygote.ZygoteError, match="^no zygote at .*No such file"):
        zygote.connect(tmp_path / "no-such-folder" / "light.sock")


def test_a_zygote_started_without_waiting_is_waited_for_by_its_first_connection(
    tmp_path: Path,
) -> None:
    z = zygote.Zygote(ENV, "light", listen=tmp_path / "light.sock", wait=False)
    try:
        connection = zygote.connect(tmp_path / "light.sock")  # before it bound, or imported
        port = free_port()
        with open(tmp_path / "log", "ab") as out:
            child = connection.spawn(_receiver(port, tmp_path / "n"), ENV, out.fileno())
        wait_until(functools.partial(http_ok, f"http://127.0.0.1:{port}/healthz"), 60, "it")
        assert _parent(child.pid) == z.process.pid
        child.terminate()
        assert child.wait(timeout=15) == 0
    finally:
        z.close()


def test_children_outlive_their_zygote(forker: zygote.Zygote, tmp_path: Path) -> None:
    port = free_port()
    with open(tmp_path / "log", "ab") as out:
        child = forker.spawn(_receiver(port, tmp_path / "n"), ENV, out.fileno())
    wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/healthz"), 60, "the receiver")
    forker.close()  # this module's last use of it
    assert not forker.alive() and http_ok(f"http://127.0.0.1:{port}/healthz")
    assert forker.listen is not None and not forker.listen.exists()
    assert child.poll() is None  # still running, though nobody here can reap it
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(timeout=15) == -signal.SIGKILL


# A process of its own (not this worker, whose zygote the run may share): its zygote killed
# while its child runs, the child is stopped as usual and the next launch forks from a new one.
_REPLACED = """
import json, os, signal, sys
from stack import zygote
from stack.launch import http_ok, running_process, tokenpulse_argv, wait_until
from tests.support.models import lifecycle_export
from tokenpulse.procs import free_port
def parent(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
out = {}
for name in ("first", "second"):
    port = free_port()
    argv = tokenpulse_argv("oncall-receiver", f"--port={port}", f"--file={sys.argv[1]}{port}")
    with running_process(argv, lambda: http_ok(f"http://127.0.0.1:{port}/healthz"),
                         what="receiver", stop_timeout_s=5) as child:
        out[name] = {"forked": isinstance(child.process, zygote.ZygoteChild),
                     "zygote": parent(child.pid)}
        if name == "first":
            os.kill(out[name]["zygote"], signal.SIGKILL)
            wait_until(lambda: not zygote._running(out["first"]["zygote"]), 15, "its end")
    out[name]["code"] = child.process.returncode
    out[name]["gone"] = not zygote._running(child.pid)
print(json.dumps(out))
"""


def test_a_killed_zygote_is_replaced_at_the_next_launch(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != zygote.SOCKETS_VARIABLE}
    done = subprocess.run([sys.executable, "-c", _REPLACED, str(tmp_path / "n")], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = json.loads(done.stdout)["first"], json.loads(done.stdout)["second"]
    assert first["forked"] and second["forked"] and first["zygote"] != second["zygote"]
    assert first["code"] is not None and first["gone"] and second["gone"]
