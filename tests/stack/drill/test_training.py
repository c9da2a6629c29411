"""The training drill's reading of the supervisor's log, on a log the real supervisor wrote.

The drill itself (a worker killed mid-run, the resume, the export served) runs in
tests/stack/test_drill.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from serving.model import supervisor
from serving.model.settings import TrainSettings
from serving.model.worker import EXIT_PORT_TAKEN
from stack.drill.training import resumed_from

# A stand-in worker (no TensorFlow). The job's n-th start (n counted per worker from the files it
# leaves): 0, worker 1 meets its port taken; 1, worker 1 leaves a checkpoint and is killed;
# 2, worker 1 meets its port taken again; 3, both finish.
WORKER = """
import json, os, signal, sys, time
index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
run = os.environ["RUN"]
start = len([p for p in os.listdir(run) if p.startswith(f"start-{index}-")])
open(f"{run}/start-{index}-{start}", "w").close()
if index == 1 and start in (0, 2):
    sys.exit(PORT_TAKEN)
if index == 1 and start == 1:
    os.makedirs(f"{run}/checkpoints", exist_ok=True)
    with open(f"{run}/checkpoints/checkpoint", "w") as f:
        f.write('model_checkpoint_path: "ckpt-75"\\n')
    os.kill(os.getpid(), signal.SIGKILL)
if start in (0, 1, 2):
    time.sleep(60)  # worker 0 waits on worker 1, as the strategy does
""".replace("PORT_TAKEN", str(EXIT_PORT_TAKEN))


def test_starts_that_met_a_taken_port_are_not_read_as_resumes(tmp_path: Path) -> None:
    settings = TrainSettings(preset="tiny", workers=2, run_dir=tmp_path, cache_dir=tmp_path,
                             progress=False, max_restarts=1, restart_delay_s=0)  # fmt: skip
    lines: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUN", str(tmp_path))
        restarts = supervisor.supervise(settings, lines.append, [sys.executable, "-c", WORKER])
    assert restarts == 1
    text = "\n".join(lines)
    assert text.count("started 2 workers") == 4 and text.count(supervisor.PORT_TAKEN) == 2
    assert resumed_from(text) == ["the start", "ckpt-75"]


def test_a_resume_from_the_wrong_checkpoint_still_shows() -> None:
    text = (
        "started 2 workers (pids 0:11 1:12) from the start; logs in /r/logs\n"
        "worker 1 (pid 12) was killed by signal 9; stopped the others\n"
        "restart 1/3 from ckpt-50\n"
        "started 2 workers (pids 0:13 1:14) from ckpt-25; logs in /r/logs\n"
    )
    assert resumed_from(text) == ["the start", "ckpt-25"]
