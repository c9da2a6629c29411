"""The supervisor with stand-in workers (plain Python, no TensorFlow): deaths, refusals, retries.

The real workers' runs (equivalence, a SIGKILL and the resume) are in test_build.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from serving.model import supervisor
from serving.model.settings import TrainSettings
from serving.model.worker import EXIT_PORT_TAKEN, EXIT_REFUSED, tf_config

# A stand-in worker: reads its index from TF_CONFIG, then does what the test's script says.
STAND_IN = """
import json, os, sys
index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
{body}
"""


def _command(body: str) -> list[str]:
    return [sys.executable, "-c", STAND_IN.format(body=body)]


def _settings(tmp_path: Path, **kw: object) -> TrainSettings:
    return TrainSettings(preset="tiny", workers=2, run_dir=tmp_path, cache_dir=tmp_path,
                         progress=False, **kw)  # fmt: skip


def test_workers_that_finish_need_no_restart_and_get_a_cluster_each(tmp_path: Path) -> None:
    body = "open(os.environ['OUT'] + str(index), 'w').write(os.environ['TF_CONFIG'])"
    lines: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OUT", str(tmp_path / "config-"))
        assert supervisor.supervise(_settings(tmp_path), lines.append, _command(body)) == 0
    configs = [json.loads((tmp_path / f"config-{i}").read_text()) for i in (0, 1)]
    assert [c["task"] for c in configs] == [{"type": "worker", "index": i} for i in (0, 1)]
    hosts = configs[0]["cluster"]["worker"]
    assert configs[1]["cluster"]["worker"] == hosts and len(set(hosts)) == 2
    assert all(h.startswith("127.0.0.1:") for h in hosts)
    assert len(lines) == 1 and lines[0].startswith("started 2 workers (pids 0:")


def test_a_death_restarts_all_from_the_newest_checkpoint_until_the_retries_run_out(
    tmp_path: Path,
) -> None:
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "checkpoint").write_text(
        f'model_checkpoint_path: "{tmp_path}/checkpoints/ckpt-20"\n'
        'all_model_checkpoint_paths: "ckpt-10"\n'
    )
    body = (
        "import signal, time\n"
        "if index == 1:\n    os.kill(os.getpid(), signal.SIGKILL)\n"
        "time.sleep(60)"
    )
    lines: list[str] = []
    with pytest.raises(supervisor.TrainingError, match="workers died 2 times; gave up"):
        supervisor.supervise(_settings(tmp_path, max_restarts=1), lines.append, _command(body))
    assert "from ckpt-20" in lines[0]
    assert "worker 1 (pid" in lines[1] and "was killed by signal 9; stopped the others" in lines[1]
    assert lines[2] == "restart 1/1 from ckpt-20"
    assert json.loads((tmp_path / "workers.json").read_text())["attempt"] == 1


def test_a_restart_waits_its_delay_with_every_worker_down(tmp_path: Path) -> None:
    # attempt 0: worker 1 dies once worker 0 has begun (on a busy machine worker 0 may start
    # late: stopped before it wrote its file, it took attempt 1 for its first); attempt 1: both
    # finish. Each worker writes when it began.
    body = (
        "import signal, time\n"
        "run = os.environ['RUN']\n"
        "attempt = int(os.path.exists(f'{run}/began-0-{index}'))\n"
        "open(f'{run}/began-{attempt}-{index}', 'w').write(repr(time.time()))\n"
        "if attempt == 0 and index == 1:\n"
        "    first = f'{run}/began-0-0'\n"
        "    while not (os.path.exists(first) and os.path.getsize(first)):\n"
        "        time.sleep(0.01)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "elif attempt == 0:\n"
        "    time.sleep(60)\n"
    )
    lines: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUN", str(tmp_path))
        settings = _settings(tmp_path, max_restarts=1, restart_delay_s=1.5)
        assert supervisor.supervise(settings, lines.append, _command(body)) == 1
    assert lines[2] == "restart 1/1 from the start in 1.5 s"
    began = {p.name: float(p.read_text()) for p in tmp_path.glob("began-*")}
    assert set(began) == {"began-0-0", "began-0-1", "began-1-0", "began-1-1"}
    # no worker of the second attempt started before the delay after the first attempt's start
    assert min(began["began-1-0"], began["began-1-1"]) - began["began-0-1"] >= 1.5


def test_a_refusing_worker_ends_the_run_at_once_with_its_message(tmp_path: Path) -> None:
    body = (
        "print('error: not this recipe', file=sys.stderr)\n"
        f"print('noise')\nsys.exit({EXIT_REFUSED})"
    )
    with pytest.raises(supervisor.TrainingError, match="^not this recipe$"):
        supervisor.supervise(_settings(tmp_path), lambda line: None, _command(body))
    assert json.loads((tmp_path / "workers.json").read_text())["attempt"] == 0


def test_a_port_taken_before_the_bind_starts_the_same_attempt_again_on_fresh_ports(
    tmp_path: Path,
) -> None:
    # worker 1's first start meets its port taken; worker 0 waits for it, as the strategy does
    body = (
        "import time\n"
        "run = os.environ['RUN']\n"
        "start = len([p for p in os.listdir(run) if p.startswith(f'config-{index}-')])\n"
        "open(f'{run}/config-{index}-{start}', 'w').write(os.environ['TF_CONFIG'])\n"
        f"if index == 1 and start == 0:\n    sys.exit({EXIT_PORT_TAKEN})\n"
        "if start == 0:\n    time.sleep(60)\n"
    )
    lines: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUN", str(tmp_path))
        assert supervisor.supervise(_settings(tmp_path), lines.append, _command(body)) == 0
    assert lines[1] == "worker 1: port taken before it was bound; the same attempt on fresh ports"
    assert lines[2].startswith("started 2 workers") and len(lines) == 3  # no death, no restart
    assert json.loads((tmp_path / "workers.json").read_text())["attempt"] == 0
    hosts = [json.loads((tmp_path / f"config-0-{n}").read_text())["cluster"]["worker"]
             for n in (0, 1)]  # fmt: skip
    assert hosts[0] != hosts[1]  # fresh ports


def test_port_clashes_past_the_bound_count_as_deaths(tmp_path: Path) -> None:
    body = f"sys.exit({EXIT_PORT_TAKEN} if index == 1 else 0)"
    lines: list[str] = []
    with pytest.raises(supervisor.TrainingError, match="workers died 1 times; gave up"):
        supervisor.supervise(_settings(tmp_path, max_restarts=0), lines.append, _command(body))
    clashes = [line for line in lines if "port taken before it was bound" in line]
    assert len(clashes) == supervisor.PORT_CLASHES
    assert lines[-1].startswith("worker 1 (pid") and "exited with status 4" in lines[-1]


def test_starts_that_met_a_taken_port_are_not_read_as_resumes(tmp_path: Path) -> None:
    # the job's n-th start (counted per worker from the files it leaves): 0, worker 1 meets its
    # port taken; 1, worker 1 leaves a checkpoint and is killed; 2, its port taken again; 3, both
    # finish
    body = (
        "import signal, time\n"
        "run = os.environ['RUN']\n"
        "start = len([p for p in os.listdir(run) if p.startswith(f'start-{index}-')])\n"
        "open(f'{run}/start-{index}-{start}', 'w').close()\n"
        f"if index == 1 and start in (0, 2):\n    sys.exit({EXIT_PORT_TAKEN})\n"
        "if index == 1 and start == 1:\n"
        "    os.makedirs(f'{run}/checkpoints', exist_ok=True)\n"
        "    state = open(f'{run}/checkpoints/checkpoint', 'w')\n"
        "    state.write('model_checkpoint_path: \"ckpt-75\"'); state.close()\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "if start in (0, 1, 2):\n    time.sleep(60)\n"  # worker 0 waits on worker 1
    )
    settings = _settings(tmp_path, max_restarts=1, restart_delay_s=0)
    lines: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUN", str(tmp_path))
        assert supervisor.supervise(settings, lines.append, _command(body)) == 1
    text = "\n".join(lines)
    assert text.count("started 2 workers") == 4 and text.count(supervisor.PORT_TAKEN) == 2
    assert supervisor.resumed_from(text) == ["the start", "ckpt-75"]


def test_a_resume_from_the_wrong_checkpoint_still_shows() -> None:
    text = (
        "started 2 workers (pids 0:11 1:12) from the start; logs in /r/logs\n"
        "worker 1 (pid 12) was killed by signal 9; stopped the others\n"
        "restart 1/3 from ckpt-50\n"
        "started 2 workers (pids 0:13 1:14) from ckpt-25; logs in /r/logs\n"
    )
    assert supervisor.resumed_from(text) == ["the start", "ckpt-25"]


def test_the_xla_cache_goes_under_the_cache_dir_unless_the_flags_name_one(tmp_path: Path) -> None:
    flags = supervisor.xla_flags("--xla_foo=1", tmp_path)
    assert flags == f"--xla_foo=1 --tf_xla_persistent_cache_directory={tmp_path / 'xla'}"
    assert (tmp_path / "xla").is_dir()  # XLA writes nothing into a missing directory
    given = "--tf_xla_persistent_cache_directory=/elsewhere"
    assert supervisor.xla_flags(given, tmp_path) == given


def test_tf_config_names_the_cluster_and_the_task() -> None:
    assert json.loads(tf_config(["a:1", "b:2"], 1)) == {
        "cluster": {"worker": ["a:1", "b:2"]},
        "task": {"type": "worker", "index": 1},
    }


@pytest.mark.parametrize("delay", [float("inf"), 1e400, 3601.0])
def test_a_restart_delay_past_an_hour_is_refused_before_the_run(
    tmp_path: Path, delay: float
) -> None:
    # time.sleep would end the run in an OverflowError after the first death instead
    with pytest.raises(ValueError, match="less than or equal to 3600"):
        _settings(tmp_path, restart_delay_s=delay)


def test_a_restart_replaces_the_pid_file_whole_so_a_reader_never_sees_it_half_written(
    tmp_path: Path,
) -> None:
    # the training drill read workers.json while a restart rewrote it in place and got ''. A
    # hard link to the first attempt's file keeps that attempt's content only if the second one
    # arrives by rename, not by truncating and rewriting the same file.
    body = (
        "import signal, time\n"
        f"pids, seen = {str(tmp_path / 'workers.json')!r}, {str(tmp_path / 'seen')!r}\n"
        "while index == 1 and not os.path.exists(pids):\n    time.sleep(0.01)\n"
        "if index == 1 and not os.path.exists(seen):\n"
        "    os.link(pids, seen)\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    lines: list[str] = []
    code = supervisor.supervise(_settings(tmp_path, max_restarts=1), lines.append, _command(body))
    assert code == 1, lines  # done on the first restart
    assert json.loads((tmp_path / "seen").read_text())["attempt"] == 0
    assert json.loads((tmp_path / "workers.json").read_text())["attempt"] == 1
