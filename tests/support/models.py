"""Exported test models: built once per model-code revision and shared across test runs."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from tokenpulse.paths import ROOT

MODEL_SRC = ROOT / "serving" / "model"
DEGRADE_NOISE = 2.0


def model_revision() -> str:
    """Hash of the model package sources: a code change rebuilds the cached test exports."""
    digest = hashlib.sha256()
    for path in sorted(MODEL_SRC.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def cache_root() -> Path:
    """Where the shared test exports live (override with TOKENPULSE_TEST_CACHE)."""
    return Path(os.environ.get("TOKENPULSE_TEST_CACHE", ROOT / ".cache" / "tokenpulse"))


def cached_export(kind: str) -> Path:
    """Path of the `tiny` export of the given kind ('normal' or 'degraded'), building it once."""
    from serving.model.build import run_build
    from serving.model.settings import BuildSettings

    root = cache_root()
    target_base = root / "test-models" / model_revision() / kind
    ready = target_base / "1" / "saved_model.pb"
    if ready.exists():
        return target_base / "1"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".test-models.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test runs build it only once
        if not ready.exists():
            noise = DEGRADE_NOISE if kind == "degraded" else 0.0
            run_build(
                BuildSettings(
                    preset="tiny",
                    base_path=target_base,
                    version=1,
                    degrade_noise=noise,
                    cache_dir=root,
                    progress=False,
                )
            )
    return target_base / "1"


def install_version(export_dir: Path, base_path: Path, version: int) -> Path:
    """Deploy an export as `base_path/<version>` atomically: copy aside, then rename into place."""
    base_path.mkdir(parents=True, exist_ok=True)
    final = base_path / str(version)
    staging = Path(tempfile.mkdtemp(prefix=f".deploy-{version}-", dir=base_path))
    shutil.copytree(export_dir, staging, dirs_exist_ok=True)
    os.chmod(staging, 0o755)
    os.replace(staging, final)
    return final
