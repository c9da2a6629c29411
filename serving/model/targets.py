"""Where a training run tells Prometheus about its workers: one file_sd file per run.

A run with `--metrics-port P` writes one target group (worker i on `--metrics-host`:P+i, by
default 127.0.0.1, labelled with the run's directory name) into `<run name>-<hash of its
path>.json` under `--targets-dir` (by default CACHE/training-targets) before its first step, and
removes it when the run ends on purpose (its last step done, or Ctrl-C). A
run that fails (a worker dead past its restarts) leaves it, so Prometheus keeps scraping the dead
targets and TokenPulseTrainingWorkerDown fires. `tokenpulse up` points a `file_sd_configs` job at
TARGETS_GLOB under the default cache directory, wherever each run's own directory is; compose's
training service writes into a volume its Prometheus mounts. One folder, not a file inside each
run: Prometheus's file_sd takes a wildcard in the file name only.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from pathlib import Path

TARGETS_DIR = "training-targets"
TARGETS_GLOB = f"{TARGETS_DIR}/*.json"


def targets_file(folder: Path, run_dir: Path) -> Path:
    """The run's file: named after its directory, and its path's hash (two `tiny` runs apart)."""
    key = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:8]
    return folder / f"{run_dir.name}-{key}.json"


def address(host: str, port: int) -> str:
    """host:port as a target (an IPv6 address in brackets)."""
    try:
        bracket = ipaddress.ip_address(host).version == 6
    except ValueError:  # a host name
        bracket = False
    return f"[{host}]:{port}" if bracket else f"{host}:{port}"


def targets(run_dir: Path, host: str, port: int, workers: int) -> list[dict[str, object]]:
    """The file's content: one target group of every worker's metrics page."""
    hosts = [address(host, port + i) for i in range(workers)]
    return [{"targets": hosts, "labels": {"run": run_dir.name}}]


def register(folder: Path, run_dir: Path, host: str, port: int, workers: int) -> Path:
    """Write the run's targets (atomically: Prometheus may read it at any moment)."""
    path = targets_file(folder, run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")  # not *.json: Prometheus never reads it half-written
    tmp.write_text(json.dumps(targets(run_dir, host, port, workers), indent=2))
    tmp.replace(path)
    return path


def unregister(folder: Path, run_dir: Path) -> None:
    """The run ended on purpose: Prometheus stops scraping its workers."""
    targets_file(folder, run_dir).unlink(missing_ok=True)
