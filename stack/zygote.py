"""Components forked from a parent that has already imported them: TensorFlow once, not per start.

A model server exec'd afresh spends about 2 CPU-s importing TensorFlow before it reads its model,
and a gateway 0.2 CPU-s importing aiohttp and its own code. So a launching process (a test worker,
`up`, a bench) starts a *zygote* at its first launch, as Android's zygote and gunicorn's
`--preload` do: `python -m stack.zygote` imports the components' code, then forks a child per
launch, which runs `tokenpulse <command> ...` from there (`tokenpulse bench launch` sets the two
ways side by side). There are two kinds (KINDS): the model server forks from one that imported
TensorFlow, everything else from one that never loads it. A test run shares one of each among all
its processes, over sockets in a private folder (ZygoteSettings.sockets).

The zygote only imports: it starts no thread of its own, no TensorFlow runtime and no gRPC
channel, so a fork carries no lock that a vanished thread held. A child gets what an exec'd one
gets: a session of its own, stdin from /dev/null, stdout and stderr to its log, the launcher's
working directory and environment, and the command line of `python -m stack.cli <command>`, in
`sys.argv` and in what `ps` shows. (/proc/PID/environ keeps showing the zygote's environment, as
it does for any process that changed its own after it started.) What an interpreter fixes at its
start (the variables SENSITIVE names) cannot change in a fork, so a launch that sets them
otherwise than the zygote has them is exec'd, as every launch was before.

The launcher talks to its zygote over a socket pair. Each launch sends the command with two file
descriptors, the child's log and one end of a fresh status socket; the zygote answers on that
socket with the child's pid, and later with its exit code once it has reaped it. `ZygoteChild`
reads them: the part of `subprocess.Popen` that `stack.launch`, `stop_process` and the
supervisors use. The zygote exits when its launcher closes the pair (or exits); running children
go on, as an exec'd child does when its parent dies.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import importlib
import io
import json
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

# what an interpreter, TensorFlow or a C library reads once, at start-up or import: a launch that
# sets any of these otherwise than the zygote's environment is exec'd, not forked
SENSITIVE = ("PYTHON", "TF_", "XLA_", "CUDA_", "LD_", "OMP_", "KMP_", "MKL_", "OPENBLAS_",
             "GRPC_", "KERAS", "MALLOC_", "TMP", "TEMP", "LANG", "LC_")  # fmt: skip
READY = b"ready"
# room in the zygote's command line for a child's: /proc/PID/cmdline (what `ps` shows) is the
# memory the kernel put argv in, which a fork shares; a child writes its own over it (`_retitle`)
CMDLINE_ROOM = 4096
# Two kinds of zygote, since what one has loaded every child carries: TensorFlow's own SQLite
# (without FTS5) would stand in for Python's under the shipper's sample store, and a gateway
# would map TensorFlow for nothing. The model server forks from the `tensorflow` one, every other
# command from the `light` one, which imports these commands' modules.
KINDS = ("light", "tensorflow")
TENSORFLOW_COMMANDS = ("modelserver",)
LIGHT_COMMANDS = ("gateway", "exporter", "shipper", "oncall-receiver")
_MAX_REQUEST = 1 << 20


class ZygoteError(RuntimeError):
    """The zygote could not be started, or stopped answering."""


SOCKETS_VARIABLE = "TOKENPULSE_ZYGOTE_SOCKETS"  # ZygoteSettings.sockets


class ZygoteSettings(BaseSettings):
    """How launches reach a zygote (TOKENPULSE_ZYGOTE_ENABLED=false: none, each is exec'd)."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_ZYGOTE_", extra="ignore")

    enabled: bool = Field(default=True, description="fork components from a preloaded parent")
    sockets: Path | None = Field(
        default=None,
        description="a folder of zygotes that processes of one run share (a test run's), one "
        "socket per kind (light.sock, tensorflow.sock): connect there instead of starting "
        "this process's own",
    )


def settings() -> ZygoteSettings:
    """ZygoteSettings from the environment; ZygoteError naming the variable it cannot read."""
    try:
        return ZygoteSettings()
    except ValidationError as exc:
        name = f"TOKENPULSE_ZYGOTE_{str(exc.errors()[0]['loc'][0]).upper()}"
        raise ZygoteError(f"{name}={os.environ.get(name)!r} is not valid: "
                          f"{exc.errors()[0]['msg']}") from None  # fmt: skip


# every component sets this from its own log level before it imports TensorFlow, so what a launch
# passes is never what its TensorFlow reads; the `tensorflow` zygote imports it at the level the
# components' default log levels set (tokenpulse.native_logs)
_SET_BY_THE_CHILD = "TF_CPP_MIN_LOG_LEVEL"


def sensitive(env: Mapping[str, str]) -> frozenset[tuple[str, str]]:
    """The variables of `env` that a forked child would inherit from its zygote, not take."""
    return frozenset(
        (k, v) for k, v in env.items() if k.startswith(SENSITIVE) and k != _SET_BY_THE_CHILD
    )


def kind_of(command: str) -> str:
    """Which zygote forks `tokenpulse <command>`."""
    return "tensorflow" if command in TENSORFLOW_COMMANDS else "light"


@dataclass
class ZygoteChild:
    """A component the zygote forked: `pid`, `returncode`, `poll()`, `wait()`, signals."""

    args: list[str]
    pid: int
    _status: socket.socket | None
    returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code once the zygote reported it, else None (never blocks)."""
        if self.returncode is None:
            self._read(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Block until the child exits; subprocess.TimeoutExpired after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self._read(left)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Signal the child, unless it is known to have exited (its pid may be reused)."""
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _read(self, timeout: float | None) -> None:
        if self._status is not None:
            if not select.select([self._status], [], [], timeout)[0]:
                return
            data = self._status.recv(64)
            self._status.close()
            self._status = None
            if data.startswith(b"exit "):
                self.returncode = int(data.split()[1])
                return
            timeout = 0.0
        # its zygote went away first: the child is init's now, and its exit code is lost with
        # the zygote; once the pid is gone (or a zombie nobody reaps), -SIGKILL stands for it
        if not _running(self.pid):
            self.returncode = -signal.SIGKILL
        elif timeout is None or timeout > 0:
            time.sleep(0.05 if timeout is None else min(timeout, 0.05))


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Connection:
    """A connection to a zygote: the launches sent over it."""

    def __init__(self, sock: socket.socket, timeout_s: float) -> None:
        self._sock = sock
        self._lock = threading.Lock()
        greeting = select.select([sock], [], [], timeout_s)[0] and sock.recv(_MAX_REQUEST)
        if not greeting or not greeting.startswith(READY):
            sock.close()
            raise ZygoteError("the zygote did not greet")
        # the start-up variables it has: a launch that sets them otherwise is not forked
        self.key = frozenset((k, v) for k, v in json.loads(greeting[len(READY) :]).items())

    def alive(self) -> bool:
        """Whether the zygote is still at the other end."""
        try:
            readable = select.select([self._sock], [], [], 0)[0]
            return not readable or self._sock.recv(1, socket.MSG_PEEK) != b""
        except (OSError, ValueError):
            return False

    def spawn(self, args: Sequence[str], env: Mapping[str, str], log_fd: int) -> ZygoteChild:
        """Fork `tokenpulse <args>` with `env`, in this process's working directory, its output
        to `log_fd`; ZygoteError (or OSError) when the zygote does not answer."""
        request = json.dumps({
            "args": list(args), "env": dict(env), "cwd": os.getcwd(),
            "nice": os.getpriority(os.PRIO_PROCESS, 0),
        }).encode()  # fmt: skip
        status, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self._lock, theirs:
                fds = array.array("i", [theirs.fileno(), log_fd])
                self._sock.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            if not select.select([status], [], [], 30.0)[0]:
                raise ZygoteError("the zygote did not answer a launch in 30 s")
            answer = status.recv(64)
            if not answer.startswith(b"pid "):
                raise ZygoteError("the zygote exited")
        except (OSError, ZygoteError):
            status.close()
            raise
        return ZygoteChild(["tokenpulse", *args], int(answer.split()[1]), status)

    def close(self) -> None:
        self._sock.close()


def socket_path(folder: Path, kind: str) -> Path:
    """Where the zygote of `kind` listens in a folder of shared zygotes."""
    return folder / f"{kind}.sock"


# a zygote binds its socket before it imports anything: a socket still missing after this is none
BIND_WAIT_S = 10.0


def connect(path: Path, timeout_s: float = 120.0) -> Connection:
    """A connection to the zygote listening at `path` (socket_path): waiting a little for the
    socket to appear (its owner does not wait for it to start; none at all when the folder does
    not exist), then up to `timeout_s` in all for it to have imported."""
    deadline = time.monotonic() + timeout_s
    bound_by = time.monotonic() + (min(BIND_WAIT_S, timeout_s) if path.parent.is_dir() else 0)
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.connect(str(path))
            break
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            sock.close()
            if time.monotonic() > bound_by:
                raise ZygoteError(f"no zygote at {path}: {exc.strerror or exc}") from None
            time.sleep(0.05)
        except OSError as exc:
            sock.close()
            raise ZygoteError(f"no zygote at {path}: {exc.strerror or exc}") from None
    return Connection(sock, max(1.0, deadline - time.monotonic()))


class Zygote:
    """A `python -m stack.zygote` this process started and owns; it exits when this process
    closes it or exits. With `listen`, other processes reach it there too (`connect`). With
    `wait` False, the start returns at once and the first use waits for the imports."""

    def __init__(
        self,
        env: Mapping[str, str],
        kind: str,
        listen: Path | None = None,
        start_timeout_s: float = 120.0,
        wait: bool = True,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"no zygote kind {kind!r}; known: {', '.join(KINDS)}")
        self.kind, self.listen = kind, listen
        self._start_timeout_s = start_timeout_s
        self._connection: Connection | None = None
        self._owner, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # what it prints (TensorFlow's import notices) is nobody's business unless it fails
        self._output = tempfile.TemporaryFile()
        argv = [sys.executable, "-m", "stack.zygote", str(theirs.fileno()), kind, str(listen or "")]
        with theirs:
            self.process = subprocess.Popen(
                [*argv, " " * CMDLINE_ROOM], pass_fds=(theirs.fileno(),), env=dict(env),
                stdin=subprocess.DEVNULL, stdout=self._output, stderr=self._output,
                start_new_session=True,
            )  # fmt: skip
        if wait:
            self._connected()

    def _connected(self) -> Connection:
        if self._connection is None:
            try:
                self._connection = Connection(self._owner, self._start_timeout_s)
            except ZygoteError:
                self.close()
                self._output.seek(0)
                tail = self._output.read().decode(errors="replace")[-2000:]
                raise ZygoteError(
                    f"the zygote did not start (exit {self.process.returncode}):\n{tail}"
                ) from None
        return self._connection

    @property
    def key(self) -> frozenset[tuple[str, str]]:
        """The start-up variables it has (Connection.key)."""
        return self._connected().key

    def alive(self) -> bool:
        return self.process.poll() is None

    def spawn(self, args: Sequence[str], env: Mapping[str, str], log_fd: int) -> ZygoteChild:
        """As Connection.spawn."""
        return self._connected().spawn(args, env, log_fd)

    def close(self) -> None:
        """Stop the zygote (its children go on)."""
        self._owner.close()
        if self.listen is not None:
            self.listen.unlink(missing_ok=True)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._output.close()


# ---- the zygote's side ----------------------------------------------------------------------


def preload(kind: str) -> None:
    """Import what the commands of `kind` import (`tensorflow`: TensorFlow, quietly, as a
    component at its default log level would), starting nothing."""
    from stack.cli import COMMANDS

    if kind == "tensorflow":
        from serving.modelserver.server import preload as modelserver_preload
        from tokenpulse.native_logs import quiet_tensorflow

        quiet_tensorflow("INFO")
        modelserver_preload()
    for name in TENSORFLOW_COMMANDS if kind == "tensorflow" else LIGHT_COMMANDS:
        importlib.import_module(COMMANDS[name][0])


@dataclass
class _Launch:
    args: list[str]
    env: dict[str, str]
    cwd: str
    nice: int
    log_fd: int


def serve(owner: socket.socket, listener: socket.socket | None) -> _Launch | None:
    """Fork a child per request, from the owner or any connection to `listener`, until the
    owner hangs up (None). In a child, return its launch, everything of the zygote's closed."""
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    sel = selectors.DefaultSelector()
    sel.register(wake_r, selectors.EVENT_READ)
    greeting = READY + json.dumps(dict(sensitive(os.environ))).encode()
    for listening in (owner, listener):
        if listening is not None:
            sel.register(listening, selectors.EVENT_READ)
    owner.sendall(greeting)
    while True:
        for key, _ in sel.select():
            sock = key.fileobj
            if sock == wake_r:
                while _drain(wake_r):
                    pass
                _reap(children)
                continue
            assert isinstance(sock, socket.socket)
            if sock is listener:
                conn, _ = listener.accept()
                conn.sendall(greeting)
                sel.register(conn, selectors.EVENT_READ)
                continue
            try:
                msg, fds = _receive(sock)
            except OSError:
                msg, fds = b"", []
            if not msg:
                if sock is owner:
                    return None
                sel.unregister(sock)
                sock.close()
                continue
            status, log_fd = socket.socket(fileno=fds[0]), fds[1]
            pid = os.fork()
            if pid == 0:
                for registered in list(sel.get_map().values()):
                    if isinstance(registered.fileobj, socket.socket):
                        registered.fileobj.close()
                sel.close()
                for fd in (wake_r, wake_w):
                    os.close(fd)
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for s in (status, *children.values()):
                    s.close()
                request = json.loads(msg)
                return _Launch(
                    request["args"], request["env"], request["cwd"], request["nice"], log_fd
                )
            os.close(log_fd)
            children[pid] = status
            status.sendall(f"pid {pid}".encode())
        _reap(children)


def _drain(fd: int) -> bool:
    try:
        return bool(os.read(fd, 512))
    except BlockingIOError:
        return False


def _receive(control: socket.socket) -> tuple[bytes, list[int]]:
    fds = array.array("i")
    msg, ancdata, _, _ = control.recvmsg(_MAX_REQUEST, socket.CMSG_SPACE(2 * fds.itemsize))
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return msg, list(fds)


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock = children.pop(pid, None)
        if sock is not None:
            try:
                sock.sendall(f"exit {os.waitstatus_to_exitcode(status)}".encode())
            except OSError:
                pass  # the launcher stopped watching
            sock.close()


def become(launch: _Launch) -> list[str]:
    """Make this fork what `python -m stack.cli <args>` would be; its argv for stack.cli.main."""
    import stack.cli

    os.setsid()
    os.dup2(launch.log_fd, 1)
    os.dup2(launch.log_fd, 2)
    os.close(launch.log_fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.chdir(launch.cwd)
    with contextlib.suppress(PermissionError):  # the launcher's priority, as an exec inherits it
        os.setpriority(os.PRIO_PROCESS, 0, launch.nice)
    os.environ.clear()
    os.environ.update(launch.env)
    sys.argv = [str(stack.cli.__file__), *launch.args]
    _retitle([sys.executable, "-m", "stack.cli", *launch.args])
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = io.TextIOWrapper(
            io.FileIO(fd, "w", closefd=False),
            encoding="utf-8",
            errors="backslashreplace" if fd == 2 else "strict",
            write_through=True,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    return launch.args


def _retitle(words: Sequence[str]) -> None:
    """Write `words` over this process's command line, as `ps` and /proc/PID/cmdline read it
    (cut to the room the zygote's own took)."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end: stat's 48th and 49th
    room = end - start
    data = "\0".join(words).encode(errors="surrogateescape")[: room - 1]
    ctypes.memmove(start, data + b"\0" * (room - len(data)), room)


def main(argv: list[str]) -> int:
    """`python -m stack.zygote OWNER_FD KIND [LISTEN_PATH]`: the owner's end of a socket pair,
    which commands it forks (KINDS), and where other processes may connect ('' for nowhere)."""
    owner, kind = socket.socket(fileno=int(argv[0])), argv[1]
    listener = None
    if len(argv) > 2 and argv[2].strip():
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(argv[2])
        listener.listen(64)
    _retitle([sys.executable, "-m", "stack.zygote", *[a for a in argv[:3] if a.strip()]])
    preload(kind)
    launch = serve(owner, listener)
    if launch is None:
        return 0
    import stack.cli

    return stack.cli.main(become(launch))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
