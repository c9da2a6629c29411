"""A worker that joins a cluster started elsewhere: the TF_CONFIG it derives or honours, and two
such workers, started as an Indexed Job's pods are, training one run on loopback."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from serving.model.settings import TrainSettings
from serving.model.worker import (
    EXIT_PORT_TAKEN,
    ClusterError,
    cluster_of,
    indexed_job_hosts,
    tf_config,
)
from tokenpulse.procs import free_port
from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args

HOSTS = indexed_job_hosts("tokenpulse-training", "tokenpulse-training", 2, 2222)


def test_an_indexed_jobs_pods_are_named_by_the_headless_service() -> None:
    assert HOSTS == ["tokenpulse-training-0.tokenpulse-training:2222",
                     "tokenpulse-training-1.tokenpulse-training:2222"]  # fmt: skip


def test_the_index_and_the_hosts_make_the_tf_config() -> None:
    assert TrainSettings(worker_hosts=[",".join(HOSTS)], worker_index=1).worker_hosts == HOSTS
    settings = TrainSettings(worker_hosts=HOSTS, worker_index=1)
    config, index, count = cluster_of(settings, {})
    assert (json.loads(config), index, count) == (
        {"cluster": {"worker": HOSTS}, "task": {"type": "worker", "index": 1}}, 1, 2)  # fmt: skip


def test_the_index_and_hosts_come_from_the_environment_as_a_pod_sets_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOKENPULSE_MODEL_WORKER_INDEX", "1")
    monkeypatch.setenv("TOKENPULSE_MODEL_WORKER_HOSTS", ",".join(HOSTS))
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser, TrainSettings, style=KEBAB)
    settings = settings_from_args(TrainSettings, parser.parse_args([]))
    assert (settings.worker_index, settings.worker_hosts) == (1, HOSTS)


def test_a_tfjobs_tf_config_is_honoured_as_given() -> None:
    given = {"cluster": {"worker": HOSTS}, "task": {"type": "worker", "index": 0},
             "environment": "cloud"}  # fmt: skip
    config, index, count = cluster_of(
        TrainSettings(tf_config=True), {"TF_CONFIG": json.dumps(given)}
    )
    assert (json.loads(config), index, count) == (given, 0, 2)


@pytest.mark.parametrize(
    "env",
    [{}, {"TF_CONFIG": "{"},
     {"TF_CONFIG": json.dumps({"cluster": {"worker": HOSTS, "ps": ["p:1"]},
                               "task": {"type": "worker", "index": 0}})},
     {"TF_CONFIG": json.dumps({"cluster": {"worker": HOSTS},
                               "task": {"type": "worker", "index": 2}})}],
)  # fmt: skip
def test_a_tf_config_without_a_worker_cluster_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(ClusterError):
        cluster_of(TrainSettings(tf_config=True), env)


@pytest.mark.parametrize(
    "kw",
    [{"worker_hosts": HOSTS}, {"worker_index": 0}, {"worker_hosts": HOSTS, "worker_index": 2},
     {"worker_hosts": HOSTS, "worker_index": 0, "workers": 2},
     {"tf_config": True, "worker_hosts": HOSTS, "worker_index": 0}],
)  # fmt: skip
def test_one_way_to_name_the_cluster(kw: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        TrainSettings(**kw)


def test_two_joined_workers_train_one_run(tmp_path: Path) -> None:
    """Each started alone with its index, as the Indexed Job starts its pods: the run ends with
    the chief's report over 2 workers and its checkpoint in the shared run directory."""
    hosts = ",".join(f"127.0.0.1:{free_port()}" for _ in range(2))
    run_dir = tmp_path / "run"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "stack.cli",
                "model",
                "train",
                "--preset",
                "tiny",
                "--steps",
                "4",
                "--checkpoint-every",
                "2",
                "--run-dir",
                str(run_dir),
                "--cache-dir",
                str(tmp_path),
                "--no-progress",
                "--worker-hosts",
                hosts,
                "--worker-index",
                str(i),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )  # fmt: skip
        for i in range(2)
    ]
    try:
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    chief, other = (json.loads(out) for out, _ in outs)
    assert (chief["workers"], chief["replicas"], chief["steps"]) == (2, 2, 4)
    assert chief["checkpoint"].endswith("ckpt-4")
    assert other == {"worker": 1, "workers": 2}


@pytest.mark.slow  # a TensorFlow worker: `make test`, not the inner loop
def test_a_worker_whose_address_another_process_bound_exits_port_taken(tmp_path: Path) -> None:
    """What the supervisor starts again on fresh ports (test_supervisor.py): the real
    TensorFlow bind failure, told apart from any other death."""
    with socket.socket() as held:  # bound as another test's server would, without SO_REUSEPORT
        held.bind(("127.0.0.1", 0))
        held.listen()
        hosts = [f"127.0.0.1:{held.getsockname()[1]}", f"127.0.0.1:{free_port()}"]
        settings = TrainSettings(preset="tiny", workers=2, run_dir=tmp_path / "run",
                                 cache_dir=tmp_path, progress=False)  # fmt: skip
        env = dict(os.environ, TF_CONFIG=tf_config(hosts, 0), TF_CPP_MIN_LOG_LEVEL="2")
        done = subprocess.run(
            [sys.executable, "-m", "serving.model.worker", settings.model_dump_json()],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert done.returncode == EXIT_PORT_TAKEN, done.stderr[-3000:]
    assert "error: this worker's address could not be bound" in done.stderr
    assert "Traceback" not in done.stderr
