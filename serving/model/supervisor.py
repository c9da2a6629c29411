"""`--workers N`: start N worker processes on loopback, watch them, restart the job if one dies.

Every attempt gets fresh loopback ports and a TF_CONFIG per worker; each worker's output is
appended to `RUN/logs/worker-<i>.log` and the attempt's pids are in `RUN/workers.json`; the
workers share an XLA compilation cache in `CACHE/xla`. A worker
that exits non-zero (or is killed) takes the job down: MultiWorkerMirroredStrategy cannot lose a
member, so the others are stopped and all N start again from the newest checkpoint (at most K
steps lost, as Keras's BackupAndRestore), up to `max_restarts` times. A worker that refuses the
run (`worker.EXIT_REFUSED`: another recipe's checkpoints...) ends it at once with its message.
A worker whose port another process bound first (`worker.EXIT_PORT_TAKEN`: free_port's pick is
only free when picked) trained nothing: the attempt starts again on fresh ports, uncounted.
One line per event goes to `say`; with progress on, the chief's step lines are echoed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from serving.model.settings import TrainSettings
from serving.model.worker import EXIT_PORT_TAKEN, EXIT_REFUSED, tf_config
from tokenpulse.atomic import atomic_write
from tokenpulse.procs import free_port, stop_process

POLL_S = 0.1
# what the log says of a start that trained nothing
PORT_TAKEN = "port taken before it was bound"
_STARTED = re.compile(r"started \d+ workers \(pids [^)]*\) from (.+?); logs in ")
# port clashes a run rides out (another process took a picked port before the worker bound it)
PORT_CLASHES = 3
WORKER = (sys.executable, "-m", "serving.model.worker")  # + the settings as JSON
XLA_CACHE = "xla"
_NEWEST = re.compile(r'^model_checkpoint_path: "(.*)"$', re.M)


class TrainingError(RuntimeError):
    """The run could not finish: a worker refused it, or died more often than allowed."""


@dataclass
class WorkerProcess:
    """One started worker."""

    index: int
    process: subprocess.Popen[bytes]
    log_path: Path


def newest_checkpoint(directory: Path) -> str | None:
    """The newest checkpoint's name from the manager's state file (no TensorFlow import)."""
    try:
        found = _NEWEST.search((directory / "checkpoint").read_text())
    except OSError:
        return None
    return Path(found.group(1)).name if found else None


def resumed_from(text: str) -> list[str]:
    """Where each start of the job in `supervise`'s output `text` resumed from ('the start' or a
    checkpoint's name), leaving out a start that trained nothing because a port was taken."""
    starts: list[str] = []
    for line in text.splitlines():
        if found := _STARTED.search(line):
            starts.append(found.group(1))
        elif PORT_TAKEN in line and starts:
            starts.pop()
    return starts


def xla_flags(given: str, cache_dir: Path) -> str:
    """TF_XLA_FLAGS with a persistent compilation cache under the cache directory (unless the
    flags name one): a restarted worker, or the next run of the recipe, loads the compiled step
    instead of compiling it again (about 3.5 s of CPU per worker on `tiny`)."""
    if "tf_xla_persistent_cache_directory" in given:
        return given
    (cache_dir / XLA_CACHE).mkdir(parents=True, exist_ok=True)  # XLA writes nothing otherwise
    return f"{given} --tf_xla_persistent_cache_directory={cache_dir / XLA_CACHE}".strip()


def _start(
    settings: TrainSettings, run_dir: Path, attempt: int, command: Sequence[str]
) -> list[WorkerProcess]:
    hosts = [f"127.0.0.1:{free_port()}" for _ in range(settings.workers)]
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    workers = []
    for index in range(settings.workers):
        path = run_dir / "logs" / f"worker-{index}.log"
        env = dict(os.environ, TF_CONFIG=tf_config(hosts, index), PYTHONUNBUFFERED="1")
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env["TF_XLA_FLAGS"] = xla_flags(env.get("TF_XLA_FLAGS", ""), settings.cache_dir)
        argv = [*command, settings.model_dump_json()]
        with open(path, "ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=out, env=env, start_new_session=True)
        workers.append(WorkerProcess(index, proc, path))
    pids = {str(w.index): w.process.pid for w in workers}
    # by rename: the training drill reads it while a restart replaces it
    atomic_write(run_dir / "workers.json", json.dumps({"attempt": attempt, "pids": pids}))
    return workers


def _refusal(path: Path) -> str:
    """The worker's `error: ...` line (TensorFlow may log more after it, on its way out)."""
    lines = path.read_text(errors="replace").splitlines()
    found = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
    return found[-1] if found else f"a worker refused the run (see {path})"


def _death(worker: WorkerProcess) -> str:
    code = worker.process.returncode or 0
    return f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"


class _ChiefEcho:
    """Follows the chief's log and echoes its progress lines."""

    def __init__(self, path: Path, say: Callable[[str], None]) -> None:
        self.path, self.say, self.offset = path, say, path.stat().st_size if path.exists() else 0

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as log:
                log.seek(self.offset)
                chunk = log.read()
        except OSError:
            return
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            try:
                event: dict[str, Any] = json.loads(line)
            except ValueError:
                continue
            if event.get("message") == "step":
                self.say(f"step {event['step']}/{event['steps']} loss {event['loss']:.4f}")


def _watch(workers: list[WorkerProcess], echo: _ChiefEcho | None) -> list[WorkerProcess]:
    """Wait until every worker exits 0 (none failed) or one fails; the failed ones, a killed
    one first (its peers' collectives then fail too, and may exit as it is noticed)."""
    while True:
        if echo is not None:
            echo.poll()
        codes = [w.process.poll() for w in workers]
        failed = [w for w, code in zip(workers, codes, strict=True) if code not in (None, 0)]
        if failed:
            return sorted(failed, key=lambda w: (w.process.returncode or 0) >= 0)
        if all(code == 0 for code in codes):
            return []
        time.sleep(POLL_S)


def supervise(
    settings: TrainSettings,
    say: Callable[[str], None] | None = None,
    command: Sequence[str] = WORKER,
) -> int:
    """Run the job to the end, restarting it after a death; how many restarts it took.
    `command` starts one worker (tests start stand-ins)."""
    say = say or _stderr
    run_dir = settings.run_path()
    checkpoints = run_dir / "checkpoints"
    attempt, clashes = 0, 0
    while attempt <= settings.max_restarts:
        newest = newest_checkpoint(checkpoints)
        workers = _start(settings, run_dir, attempt, command)
        pids = " ".join(f"{w.index}:{w.process.pid}" for w in workers)
        say(f"started {len(workers)} workers (pids {pids}) from {newest or 'the start'}; "
            f"logs in {run_dir / 'logs'}")  # fmt: skip
        echo = _ChiefEcho(workers[0].log_path, say) if settings.progress else None
        try:
            failed = _watch(workers, echo)
        finally:
            for worker in workers:  # the survivors of a death wait on it forever
                stop_process(worker.process, timeout_s=5.0)
        if not failed:
            return attempt
        for worker in failed:
            if worker.process.returncode == EXIT_REFUSED:
                raise TrainingError(_refusal(worker.log_path))
        taken = [w for w in failed if w.process.returncode == EXIT_PORT_TAKEN]
        if taken and clashes < PORT_CLASHES:
            # the strategy binds every address before any step: nothing was trained, and the
            # restart budget is for deaths
            clashes += 1
            names = ", ".join(f"worker {w.index}" for w in taken)
            say(f"{names}: {PORT_TAKEN}; the same attempt on fresh ports")
            continue
        deaths = "; ".join(f"worker {w.index} (pid {w.process.pid}) {_death(w)}" for w in failed)
        say(f"{deaths}; stopped the others")
        if attempt < settings.max_restarts:
            delay = f" in {settings.restart_delay_s:g} s" if settings.restart_delay_s else ""
            say(f"restart {attempt + 1}/{settings.max_restarts} from "
                f"{newest_checkpoint(checkpoints) or 'the start'}{delay}")  # fmt: skip
            time.sleep(settings.restart_delay_s)
        attempt += 1
    raise TrainingError(
        f"workers died {settings.max_restarts + 1} times; gave up (logs in {run_dir / 'logs'})"
    )


def _stderr(line: str, stream: IO[str] | None = None) -> None:
    out = stream or sys.stderr
    out.write(line + "\n")
    out.flush()
