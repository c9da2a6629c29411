"""Where a training run tells Prometheus about its workers: `RUN/prometheus-targets.json`.

A run with `--metrics-port P` writes one file_sd target group (worker i on 127.0.0.1:P+i, labelled
with the run's directory name) before its first step, and removes it when the run ends on purpose
(its last step done, or Ctrl-C). A run that fails (a worker dead past its restarts) leaves it, so
Prometheus keeps scraping the dead targets and TokenPulseTrainingWorkerDown fires. `tokenpulse up`
points a `file_sd_configs` job at every run under the default cache directory (TARGETS_GLOB).
"""

from __future__ import annotations

import json
from pathlib import Path

TARGETS_FILE = "prometheus-targets.json"
# every run under a cache directory (`<cache>/runs/<preset>`, the default RUN)
TARGETS_GLOB = f"runs/*/{TARGETS_FILE}"


def targets(run_dir: Path, port: int, workers: int) -> list[dict[str, object]]:
    """The file's content: one target group of every worker's metrics page."""
    hosts = [f"127.0.0.1:{port + i}" for i in range(workers)]
    return [{"targets": hosts, "labels": {"run": run_dir.name}}]


def register(run_dir: Path, port: int, workers: int) -> Path:
    """Write the run's targets (atomically: Prometheus may read it at any moment)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path, tmp = run_dir / TARGETS_FILE, run_dir / f".{TARGETS_FILE}.tmp"
    tmp.write_text(json.dumps(targets(run_dir, port, workers), indent=2))
    tmp.replace(path)
    return path


def unregister(run_dir: Path) -> None:
    """The run ended on purpose: Prometheus stops scraping its workers."""
    (run_dir / TARGETS_FILE).unlink(missing_ok=True)
