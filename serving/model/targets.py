"""Where a training run tells Prometheus about its workers: one file_sd file per run.

A run with `--metrics-port P` writes one target group (worker i on 127.0.0.1:P+i, labelled with
the run's directory name) into `CACHE/training-targets/<run name>-<hash of its path>.json` before
its first step, and removes it when the run ends on purpose (its last step done, or Ctrl-C). A
run that fails (a worker dead past its restarts) leaves it, so Prometheus keeps scraping the dead
targets and TokenPulseTrainingWorkerDown fires. `tokenpulse up` points a `file_sd_configs` job at
TARGETS_GLOB under the default cache directory, wherever each run's own directory is. One folder,
not a file inside each run: Prometheus's file_sd takes a wildcard in the file name only.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

TARGETS_DIR = "training-targets"
TARGETS_GLOB = f"{TARGETS_DIR}/*.json"


def targets_file(cache_dir: Path, run_dir: Path) -> Path:
    """The run's file: named after its directory, and its path's hash (two `tiny` runs apart)."""
    key = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:8]
    return cache_dir / TARGETS_DIR / f"{run_dir.name}-{key}.json"


def targets(run_dir: Path, port: int, workers: int) -> list[dict[str, object]]:
    """The file's content: one target group of every worker's metrics page."""
    hosts = [f"127.0.0.1:{port + i}" for i in range(workers)]
    return [{"targets": hosts, "labels": {"run": run_dir.name}}]


def register(cache_dir: Path, run_dir: Path, port: int, workers: int) -> Path:
    """Write the run's targets (atomically: Prometheus may read it at any moment)."""
    path = targets_file(cache_dir, run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")  # not *.json: Prometheus never reads it half-written
    tmp.write_text(json.dumps(targets(run_dir, port, workers), indent=2))
    tmp.replace(path)
    return path


def unregister(cache_dir: Path, run_dir: Path) -> None:
    """The run ended on purpose: Prometheus stops scraping its workers."""
    targets_file(cache_dir, run_dir).unlink(missing_ok=True)
