"""The one way to run a TokenPulse component as a child process: model server, gateway, exporter.

Tests, benchmarks and `tokenpulse up` all start components through these context managers:

    with running_modelserver(base_path) as ms:                # ModelServerProcess
        with running_gateway(ms.rest_url, keys_file) as gw:     # GatewayProcess
            ...  gw.url, gw.pid, ms.rest_url, ms.grpc_target, ms.metrics_url
    with running_exporter(["--tfserving.url=..."]) as ex:     # ExporterProcess
        ...  ex.metrics_url
    with running_process(argv, ready=lambda: http_ok(url), what="prometheus"):
        ...                                                     # any other program

Each one spawns `python -m stack.cli <component>` (`tokenpulse_argv`) in its own session on
127.0.0.1, on free ports unless ports are given (`up` passes its fixed ones), writes the child's
stdout and stderr to `log_path` (default: a temporary file, read with `.stderr()`), waits until the
component is ready (model server: the model has an AVAILABLE version; gateway: /healthz answers
200; exporter: /metrics answers, optionally containing `ready_line`), raises a `LaunchError`
subclass carrying the log tail when the child exits or times out first, and always stops the child
on leaving the block: SIGTERM, then SIGKILL after `stop_timeout_s`. A supervisor (`up`) watches
`.process.poll()` of each while the blocks are open.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stack import allocator, zygote
from tokenpulse.logging import get_logger
from tokenpulse.procs import ChildProcess, free_port, stop_process
from tokenpulse.tfserving import status as tfs_status
from tokenpulse.tfserving.config import DEFAULT_METRICS_PATH
from tokenpulse.tfserving.errors import TfServingBadResponse
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

log = get_logger(__name__)

MODELSERVER_START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 15.0


class LaunchError(RuntimeError):
    """A component exited, or never became ready, while being started."""


class ModelServerStartError(LaunchError):
    """The model server exited or never reported an AVAILABLE version."""


class GatewayStartError(LaunchError):
    """The gateway exited or never answered /healthz."""


class ExporterStartError(LaunchError):
    """The exporter exited or never served its metrics page."""


@dataclass
class Launched:
    """What every running component has: its process and its log."""

    pid: int
    process: ChildProcess = field(repr=False)
    log_path: Path = field(repr=False)
    started_in_s: float = 0.0  # spawn -> ready

    def stderr(self) -> str:
        """Everything the component logged so far (its structlog JSON lines)."""
        return self.log_path.read_text(errors="replace")


def wait_until(
    predicate: Callable[[], Any],
    timeout_s: float = 30.0,
    what: str = "condition",
    every_s: float = 0.05,
) -> Any:
    """Poll until `predicate()` is truthy and return that value; AssertionError naming `what`
    after `timeout_s` (for tests and benches waiting on a running component)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(every_s)


def get_json(url: str, timeout_s: float = 2.0) -> Any:
    """GET a JSON document; None when the server is unreachable or the body is not JSON."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return json.loads(resp.read() or b"null")
    except (urllib.error.URLError, OSError, ValueError):
        return None


def http_ok(url: str, timeout_s: float = 2.0) -> bool:
    """True when GET `url` answers 2xx."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return bool(200 <= resp.status < 300)
    except (urllib.error.URLError, OSError):
        return False


def available_versions(rest_url: str, model_name: str) -> list[int]:
    """The model's AVAILABLE versions, newest first ([] when unreachable or not a status)."""
    doc = get_json(f"{rest_url}{tfs_status.status_path(model_name)}")
    try:
        return tfs_status.available_versions(tfs_status.parse_model_status(doc))
    except TfServingBadResponse:
        return []


@contextlib.contextmanager
def running_process(
    argv: Sequence[str],
    ready: Callable[[], bool],
    *,
    what: str,
    error: type[LaunchError] = LaunchError,
    env: dict[str, str] | None = None,
    log_path: Path | None = None,
    start_timeout_s: float = 60.0,
    stop_timeout_s: float = STOP_TIMEOUT_S,
) -> Iterator[Launched]:
    """Spawn `argv` (any program), wait for `ready()`, yield, and stop the child whatever happens.

    `env` replaces this process's environment (None: inherit it); TF_CPP_MIN_LOG_LEVEL defaults
    to 2 and PYTHONUNBUFFERED is set, so TensorFlow's start-up chatter stays out of the log.
    """
    with contextlib.ExitStack() as stack:
        if log_path is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="tp-launch-"))
            log_path = Path(tmp) / "output.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        child_env = launch_env(env)
        started = time.perf_counter()
        with open(log_path, "ab", opener=_private) as log_file:
            proc = _start(list(argv), child_env, log_file.fileno())
        stack.callback(stop_process, proc, stop_timeout_s)
        child = Launched(pid=proc.pid, process=proc, log_path=log_path)
        deadline = time.monotonic() + start_timeout_s
        while not ready():
            if proc.poll() is not None:
                raise error(f"{what} exited with {proc.returncode}:\n{child.stderr()[-4000:]}")
            if time.monotonic() > deadline:
                raise error(
                    f"{what} not ready after {start_timeout_s:.0f}s:\n{child.stderr()[-4000:]}"
                )
            time.sleep(0.05)
        child.started_in_s = time.perf_counter() - started
        yield child


def launch_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a component is launched with: `env` (None: this process's), unbuffered
    output, TensorFlow's start-up notices left out unless the caller sets their level, and
    tcmalloc preloaded where installed (stack/allocator.py)."""
    try:
        child_env = allocator.with_tcmalloc(os.environ if env is None else env)
    except allocator.AllocatorError as exc:
        raise LaunchError(str(exc)) from None
    child_env["PYTHONUNBUFFERED"] = "1"
    child_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return child_env


# this process's zygotes by kind (stack.zygote.KINDS), started at its first launch of a command
# of that kind with the environment a launch inherits by default, or reached in the run's folder
# of shared ones; a kind that would not start is left out (its launches are exec'd)
_zygotes: dict[str, zygote.Zygote | zygote.Connection] = {}
_zygotes_failed: set[str] = set()
_zygotes_lock = threading.Lock()


def _start(argv: list[str], env: dict[str, str], log_fd: int) -> ChildProcess:
    """`tokenpulse <command>` forked from this process's zygote of its kind where it can be: not
    when a variable fixed at an interpreter's start (stack.zygote.SENSITIVE) differs from the
    zygote's; anything else, and everything when no zygote would start, exec'd in a session of
    its own."""
    try:
        wanted = zygote.settings()
    except zygote.ZygoteError as exc:
        raise LaunchError(str(exc)) from None
    forker = None
    if argv[:3] == tokenpulse_argv() and len(argv) > 3 and wanted.enabled:
        forker = _forker(zygote.kind_of(argv[3]), wanted.sockets)
    if forker is not None:
        differ = sorted(dict(forker.key.symmetric_difference(zygote.sensitive(env))))
        if not differ:
            return forker.spawn(argv[3:], env, log_fd)
        log.info("exec'd, not forked: start-up variables differ", command=argv[3], names=differ)
    return subprocess.Popen(argv, stdout=log_fd, stderr=log_fd, env=env, start_new_session=True)


def _forker(kind: str, shared: Path | None) -> zygote.Zygote | zygote.Connection | None:
    """This process's zygote of `kind`: the run's shared one where `shared` names their folder,
    else one of its own, started (again, when the last one died) with the environment a launch
    inherits by default, so that every launch that sets no start-up variable forks."""
    with _zygotes_lock:
        current = _zygotes.get(kind)
        if current is not None and current.alive():
            return current
        _zygotes.pop(kind, None)
        if shared is not None:
            try:
                _zygotes[kind] = zygote.connect(zygote.socket_path(shared, kind))
                return _zygotes[kind]
            except zygote.ZygoteError as exc:
                log.warning("no shared zygote: starting this process's own", error=str(exc))
        if kind not in _zygotes_failed:
            try:
                _zygotes[kind] = zygote.Zygote(launch_env(), kind)
            except (zygote.ZygoteError, OSError) as exc:
                log.warning("components start exec'd: no zygote", kind=kind,
                            error=str(exc).splitlines()[0])  # fmt: skip
                _zygotes_failed.add(kind)
        return _zygotes.get(kind)


def _private(path: str, flags: int) -> int:
    """Open a component's log 0600, one an earlier run left too: it holds what the component
    printed (the on-call receiver's: every page's text), private like the other run files."""
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)
    return fd


def tokenpulse_argv(*args: str) -> list[str]:
    """The command line of `tokenpulse <args>` run by this interpreter."""
    return [sys.executable, "-m", "stack.cli", *args]


@dataclass
class ModelServerProcess(Launched):
    """A running model server: where to reach it and how to look at it."""

    rest_url: str = ""  # e.g. http://127.0.0.1:41234
    grpc_target: str = ""  # e.g. 127.0.0.1:41235
    model_name: str = DEFAULT_MODEL_NAME
    rest_port: int = 0
    grpc_port: int = 0
    metrics_url: str = ""
    config_file: Path | None = None

    def model_status(self, model_name: str | None = None) -> dict[str, Any]:
        """The REST model status document, as TF Serving returns it."""
        path = tfs_status.status_path(model_name or self.model_name)
        with urllib.request.urlopen(f"{self.rest_url}{path}", timeout=5) as resp:
            return dict(json.loads(resp.read()))

    def metrics_text(self) -> str:
        """The Prometheus page, as text."""
        with urllib.request.urlopen(self.metrics_url, timeout=5) as resp:
            return str(resp.read().decode())


@contextlib.contextmanager
def running_modelserver(
    base_path: Path | None = None,
    *,
    model_name: str = DEFAULT_MODEL_NAME,
    config_file: Path | None = None,
    enable_batching: bool = True,
    batching_parameters: str | None = None,
    batching_parameters_file: Path | None = None,
    monitoring_config_file: Path | None = None,
    file_system_poll_wait_seconds: float = 1.0,
    rest_port: int | None = None,
    grpc_port: int | None = None,
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    log_path: Path | None = None,
    start_timeout_s: float = MODELSERVER_START_TIMEOUT_S,
    stop_timeout_s: float = STOP_TIMEOUT_S,
) -> Iterator[ModelServerProcess]:
    """Run `tokenpulse modelserver` on `base_path` (one model) or `config_file` for the block.

    `batching_parameters` is the text of a TF Serving `batching_parameters.txt`, or pass the file
    itself as `batching_parameters_file` (neither: the server's defaults). Ready once `model_name`
    has an AVAILABLE version. The metrics page is on at DEFAULT_METRICS_PATH unless a monitoring
    config file says otherwise.
    """
    if (base_path is None) == (config_file is None):
        raise ValueError("give exactly one of base_path or config_file")
    if batching_parameters is not None and batching_parameters_file is not None:
        raise ValueError("give at most one of batching_parameters or batching_parameters_file")
    rest_port, grpc_port = rest_port or free_port(), grpc_port or free_port()
    with tempfile.TemporaryDirectory(prefix="tp-modelserver-") as tmp:
        if monitoring_config_file is None:
            monitoring_config_file = Path(tmp) / "monitoring.config"
            monitoring_config_file.write_text(
                f'prometheus_config: {{ enable: true, path: "{DEFAULT_METRICS_PATH}" }}\n'
            )
        if batching_parameters is not None:
            batching_parameters_file = Path(tmp) / "batching_parameters.txt"
            batching_parameters_file.write_text(batching_parameters)
        argv = tokenpulse_argv(
            "modelserver",
            f"--port={grpc_port}",
            f"--rest_api_port={rest_port}",
            f"--monitoring_config_file={monitoring_config_file}",
            f"--file_system_poll_wait_seconds={file_system_poll_wait_seconds:g}",
            f"--enable_batching={'true' if enable_batching else 'false'}",
        )
        if config_file is not None:
            argv.append(f"--model_config_file={config_file}")
        else:
            argv += [f"--model_name={model_name}", f"--model_base_path={base_path}"]
        if batching_parameters_file is not None:
            argv.append(f"--batching_parameters_file={batching_parameters_file}")
        argv += list(extra_args)
        rest_url = f"http://127.0.0.1:{rest_port}"
        with running_process(
            argv,
            lambda: bool(available_versions(rest_url, model_name)),
            what="model server",
            error=ModelServerStartError,
            env=dict(os.environ, **(env or {})),
            log_path=log_path if log_path is not None else Path(tmp) / "stderr.log",
            start_timeout_s=start_timeout_s,
            stop_timeout_s=stop_timeout_s,
        ) as child:
            yield ModelServerProcess(
                **vars(child),
                rest_url=rest_url,
                grpc_target=f"127.0.0.1:{grpc_port}",
                model_name=model_name,
                rest_port=rest_port,
                grpc_port=grpc_port,
                metrics_url=f"{rest_url}{DEFAULT_METRICS_PATH}",
                config_file=config_file,
            )


@dataclass
class GatewayProcess(Launched):
    """A running gateway."""

    url: str = ""
    port: int = 0

    def access_logs(self) -> list[dict[str, Any]]:
        """The parsed access-log lines (message "request") so far."""
        out = []
        for line in self.stderr().splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("message") == "request":
                out.append(doc)
        return out


def _setting_value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, list | dict | bool) else str(value)


@contextlib.contextmanager
def running_gateway(
    upstream_url: str,
    keys_file: Path,
    *,
    port: int | None = None,
    env: dict[str, str] | None = None,
    log_path: Path | None = None,
    start_timeout_s: float = 30.0,
    stop_timeout_s: float = STOP_TIMEOUT_S,
    wrap: Sequence[str] = (),
    **settings: Any,
) -> Iterator[GatewayProcess]:
    """Run `tokenpulse gateway` against `upstream_url` for the block; ready when /healthz is 200.

    `settings` are GatewaySettings fields, passed as TOKENPULSE_GATEWAY_<NAME> variables (lists,
    dicts and booleans JSON-encoded); TOKENPULSE_GATEWAY_* variables of this process are not
    inherited, so only what is given here configures the child. `wrap` goes before the command
    line (a profiler that launches its target); the yielded pid is then the wrapper's.
    """
    port = port or free_port()
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPULSE_GATEWAY_")}
    child_env.update(env or {})
    child_env["TOKENPULSE_GATEWAY_PORT"] = str(port)
    child_env["TOKENPULSE_GATEWAY_UPSTREAM_URL"] = upstream_url
    child_env["TOKENPULSE_GATEWAY_KEYS_FILE"] = str(keys_file)
    for name, value in settings.items():
        child_env[f"TOKENPULSE_GATEWAY_{name.upper()}"] = _setting_value(value)
    url = f"http://127.0.0.1:{port}"
    with running_process(
        [*wrap, *tokenpulse_argv("gateway")],
        lambda: http_ok(f"{url}/healthz", timeout_s=0.5),
        what="gateway",
        error=GatewayStartError,
        env=child_env,
        log_path=log_path,
        start_timeout_s=start_timeout_s,
        stop_timeout_s=stop_timeout_s,
    ) as child:
        yield GatewayProcess(**vars(child), url=url, port=port)


@dataclass
class ExporterProcess(Launched):
    """A running exporter."""

    url: str = ""
    metrics_url: str = ""
    port: int = 0


def _metrics_contain(url: str, needle: str | None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return needle is None or needle in resp.read().decode(errors="replace")
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def running_exporter(
    args: Sequence[str] = (),
    *,
    port: int | None = None,
    ready_line: str | None = None,
    env: dict[str, str] | None = None,
    log_path: Path | None = None,
    start_timeout_s: float = 60.0,
    stop_timeout_s: float = STOP_TIMEOUT_S,
) -> Iterator[ExporterProcess]:
    """Run `tokenpulse exporter <args>` listening on 127.0.0.1 for the block.

    Ready when /metrics answers (and contains `ready_line`, when given: e.g. a canary series that
    only appears after the first canary run).
    """
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    with running_process(
        tokenpulse_argv("exporter", f"--web.listen-address=127.0.0.1:{port}", *args),
        lambda: _metrics_contain(f"{url}/metrics", ready_line),
        what="exporter",
        error=ExporterStartError,
        env=dict(os.environ, **(env or {})),
        log_path=log_path,
        start_timeout_s=start_timeout_s,
        stop_timeout_s=stop_timeout_s,
    ) as child:
        yield ExporterProcess(**vars(child), url=url, metrics_url=f"{url}/metrics", port=port)
