"""One training worker process, as `tokenpulse model train --workers N` starts it, or as a pod
of a cluster started elsewhere joins (`model train --worker-index I --worker-hosts ...` for an
Indexed Job, `model train --tf-config` under a TFJob: `join`).

`python -m serving.model.worker SETTINGS_JSON`, with TF_CONFIG naming the cluster and this
worker's index. Logging is configured before TensorFlow is imported (its start-up chatter stays
out of the worker's log). Exit codes: 0 done, EXIT_REFUSED for a run that would fail the same way
again (another recipe's checkpoints, a batch that does not split), EXIT_PORT_TAKEN when another
process bound this worker's address first (the supervisor starts the attempt again on fresh
ports), anything else a failure the supervisor restarts from the latest checkpoint.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any

from serving.model.settings import TrainSettings
from tokenpulse.logging import configure_logging, get_logger

EXIT_REFUSED = 3
EXIT_PORT_TAKEN = 4  # another process bound this worker's port first: start again elsewhere
log = get_logger(__name__)


def tf_config(hosts: list[str], index: int) -> str:
    """The TF_CONFIG of worker `index` in a cluster of `hosts`."""
    return json.dumps({"cluster": {"worker": hosts}, "task": {"type": "worker", "index": index}})


def indexed_job_hosts(job: str, service: str, count: int, port: int) -> list[str]:
    """The workers of an Indexed Job whose pods' subdomain is a headless Service: pod i is
    `<job>-<i>.<service>` in DNS."""
    return [f"{job}-{i}.{service}:{port}" for i in range(count)]


class ClusterError(ValueError):
    """TF_CONFIG names no worker cluster this process can join."""


def cluster_of(settings: TrainSettings, environ: Mapping[str, str]) -> tuple[str, int, int]:
    """The TF_CONFIG, index and worker count of a worker that joins a cluster: from
    --worker-hosts/--worker-index, or the TF_CONFIG in `environ` (--tf-config)."""
    if settings.worker_hosts and settings.worker_index is not None:
        hosts, index = settings.worker_hosts, settings.worker_index
        return tf_config(hosts, index), index, len(hosts)
    try:
        config = json.loads(environ["TF_CONFIG"])
        task, workers = config["task"], config["cluster"]["worker"]
        index = int(task["index"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ClusterError(f"TF_CONFIG names no worker cluster: {exc!r}") from exc
    if (
        task.get("type") != "worker"
        or not 0 <= index < len(workers)
        or set(config["cluster"]) != {"worker"}
    ):
        raise ClusterError("TF_CONFIG must name workers only, and this task as one of them")
    return json.dumps(config), index, len(workers)


def join(settings: TrainSettings, environ: MutableMapping[str, str] = os.environ) -> dict[str, Any]:
    """Train as one worker of a cluster launched elsewhere (each pod runs this); the chief's
    report, another worker's index. A refusal raises, as the in-process run's does. Its
    metrics server listens on --metrics-port itself: every pod has its own address."""
    config, index, count = cluster_of(settings, environ)
    environ["TF_CONFIG"] = config  # MultiWorkerMirroredStrategy reads it from the environment
    report = train_worker(settings.model_copy(update={"workers": count}), index, count,
                          settings.metrics_port)  # fmt: skip
    return report or {"worker": index, "workers": count}


def main(argv: list[str] | None = None) -> int:
    """Train this worker's part of the run, as the supervisor started it."""
    argv = sys.argv[1:] if argv is None else argv
    settings = TrainSettings.model_validate_json(argv[0])
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    index, count = int(config["task"]["index"]), len(config["cluster"]["worker"])
    configure_logging(f"model-worker-{index}")
    from serving.model.checkpoints import CheckpointError
    from serving.model.replicas import PortTaken, ReplicaError

    port = settings.metrics_port + index if settings.metrics_port else 0
    try:
        train_worker(settings, index, count, port)
    except (CheckpointError, ReplicaError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_REFUSED
    except PortTaken as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_PORT_TAKEN
    return 0


def train_worker(
    settings: TrainSettings, index: int, count: int, metrics_port: int
) -> dict[str, Any] | None:
    """Train worker `index` of `count` (TF_CONFIG set); the chief's report."""
    from serving.model.loop import Role, train_process
    from serving.model.metrics import TrainingMetrics

    role = Role(index, count)
    metrics = TrainingMetrics(worker=index, role=role.name)
    if metrics_port:
        metrics.serve(metrics_port, settings.metrics_host)
    log.info("worker started", worker=index, role=role.name, pid=os.getpid())
    return train_process(settings, role, metrics)


if __name__ == "__main__":
    sys.exit(main())
