"""restart-no-available-version's config without a stack: what the restarted model server is left
serving, and the original put back. The drill itself runs in tests/stack/test_drill.py."""

from __future__ import annotations

import os
from pathlib import Path

from stack.drill.outages import RestartNoAvailableVersion, _replace
from stack.drill.target import Target
from stack.up.state import StackState, write_state
from tokenpulse.tfserving.config import load_model_server_config
from tokenpulse.tfserving.render import render_models_config


def _target(run_dir: Path, models: Path) -> Target:
    (run_dir / "demo-key.txt").write_text("k\n")
    write_state(StackState(
        run_dir=str(run_dir), up_pid=os.getpid(), ports={}, pids={}, rules="compressed",
        restart_delay_s=20, models_dir=str(models), model="gen", group_wait="5s",
        group_interval="1s", evaluation_interval="1s",
    ))  # fmt: skip
    return Target(run_dir)


def test_the_config_serves_only_a_version_with_no_directory_and_is_put_back(
    tmp_path: Path,
) -> None:
    base = tmp_path / "models" / "gen"
    for version in (1, 2, 90):
        (base / str(version)).mkdir(parents=True)
    path = tmp_path / "models.config"
    text = render_models_config("gen", base, (1, 2), {"stable": 1, "canary": 2}, "# header\n")
    path.write_text(text)
    path.chmod(0o640)
    target = _target(tmp_path, tmp_path / "models")

    missing = RestartNoAvailableVersion()._serve_missing_version(target, path)

    assert not (base / str(missing)).exists()
    (model,) = load_model_server_config(path).models
    assert model.version_policy is not None
    assert (model.version_policy.choice, model.version_policy.versions) == ("specific", (missing,))
    assert dict(model.version_labels) == {"stable": missing, "canary": missing}
    _replace(path, text)
    assert path.read_text() == text and path.stat().st_mode & 0o777 == 0o640
