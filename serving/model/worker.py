"""One training worker process, as `tokenpulse model train --workers N` starts it.

`python -m serving.model.worker SETTINGS_JSON`, with TF_CONFIG naming the cluster and this
worker's index. Logging is configured before TensorFlow is imported (its start-up chatter stays
out of the worker's log). Exit codes: 0 done, EXIT_REFUSED for a run that would fail the same way
again (another recipe's checkpoints, a batch that does not split), anything else a failure the
supervisor restarts from the latest checkpoint.
"""

from __future__ import annotations

import json
import os
import sys

from serving.model.settings import TrainSettings
from tokenpulse.logging import configure_logging, get_logger

EXIT_REFUSED = 3
log = get_logger(__name__)


def tf_config(hosts: list[str], index: int) -> str:
    """The TF_CONFIG of worker `index` in a cluster of `hosts`."""
    return json.dumps({"cluster": {"worker": hosts}, "task": {"type": "worker", "index": index}})


def main(argv: list[str] | None = None) -> int:
    """Train this worker's part of the run."""
    argv = sys.argv[1:] if argv is None else argv
    settings = TrainSettings.model_validate_json(argv[0])
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    index, count = int(config["task"]["index"]), len(config["cluster"]["worker"])
    configure_logging(f"model-worker-{index}")
    from serving.model.checkpoints import CheckpointError
    from serving.model.loop import Role, train_process
    from serving.model.metrics import TrainingMetrics
    from serving.model.replicas import ReplicaError

    role = Role(index, count)
    metrics = TrainingMetrics(worker=index, role=role.name)
    if settings.metrics_port:
        metrics.serve(settings.metrics_port + index)
    log.info("worker started", worker=index, role=role.name, pid=os.getpid())
    try:
        train_process(settings, role, metrics)
    except (CheckpointError, ReplicaError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(main())
