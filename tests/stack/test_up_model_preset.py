"""`tokenpulse up --model-preset-dir`: an imported keras_hub preset as versions 1 and 2, checked
and planned before anything starts (the imported model served through the model server and the
gateway: tests/serving/gateway/test_imported_e2e.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from stack import components
from stack.config import StackConfig
from stack.up import banner as up_banner
from stack.up import files, plan
from tests.support.up import up_settings
from tokenpulse.tfserving.signature import GOLDEN_FILE


def _preset(path: Path, task: str = "GPT2CausalLM") -> Path:
    """The files `save_to_preset` writes that say what a preset is (the weights are not read)."""
    path.mkdir(parents=True)
    for name in ("config.json", "metadata.json"):
        (path / name).write_text("{}")
    (path / "task.json").write_text(json.dumps({"class_name": task}))
    return path


def _version(base: Path, version: int, meta: dict[str, object]) -> Path:
    """What `model build` or `model import` leaves that up reads: the graph, golden, metadata."""
    path = base / str(version)
    (path / "assets.extra").mkdir(parents=True)
    (path / "saved_model.pb").write_bytes(b"not read here")
    (path / GOLDEN_FILE).write_text("{}")
    (path / files.META_FILE).write_text(json.dumps(meta))
    return path


def _imported(preset: Path) -> dict[str, object]:
    return {"imported": {"preset": str(preset), "task": "GPT2CausalLM", "context": 128}}


def _fake_import(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """`tokenpulse model import` replaced by one that writes what an import records."""
    calls: list[list[str]] = []

    def run(argv: list[str], check: bool) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        base, version = Path(argv[argv.index("--base-path") + 1]), argv[argv.index("--version") + 1]
        _version(base, int(version), _imported(Path(argv[argv.index("keras-hub") + 1])))
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(files.subprocess, "run", run)
    return calls


def test_both_versions_are_imported_from_the_preset_once(tmp_path, monkeypatch) -> None:
    preset = _preset(tmp_path / "my-preset")
    s = up_settings(tmp_path, model_preset_dir=preset)
    calls = _fake_import(monkeypatch)
    said: list[str] = []
    files.ensure_models(s, said.append)
    assert [argv[argv.index("--version") + 1] for argv in calls] == ["1", "2"]
    assert all(argv[argv.index("keras-hub") + 1] == str(preset.resolve()) for argv in calls)
    assert not any("build" in argv or "--degrade-noise" in argv for argv in calls)
    assert "version 2 (canary)" in said[1] and str(preset.resolve()) in said[1]
    files.ensure_models(s, said.append)  # cached: imported from the same preset, reused
    assert len(calls) == 2
    assert files.context_window(s) == 128  # an import records its window under `imported`


@pytest.mark.parametrize("there", ["own build", "another preset"])
def test_a_version_not_imported_from_the_preset_is_refused(tmp_path, monkeypatch, there) -> None:
    preset = _preset(tmp_path / "my-preset")
    s = up_settings(tmp_path, model_preset_dir=preset)
    meta = {"degrade_noise": 0.0} if there == "own build" else _imported(tmp_path / "other")
    _version(s.models_dir / "gen", 1, meta)
    calls = _fake_import(monkeypatch)
    was = "built by `model build`" if there == "own build" else f"imported from {tmp_path}/other"
    with pytest.raises(files.BuildFailed, match=f"version 1 .* was {was}, not imported from"):
        files.ensure_models(s, lambda _: None)
    assert calls == []


def test_an_imported_version_is_not_reused_as_our_own_model(tmp_path, monkeypatch) -> None:
    preset = _preset(tmp_path / "my-preset")
    s = up_settings(tmp_path)
    _version(s.models_dir / "gen", 1, _imported(preset))
    calls = _fake_import(monkeypatch)
    with pytest.raises(files.BuildFailed, match="imported from the preset .* not built by"):
        files.ensure_models(s, lambda _: None)
    assert calls == []


def test_a_directory_that_is_no_preset_stops_up_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "not-a-preset").mkdir()
    argv = [sys.executable, "-m", "stack.cli", "up", f"--run-dir={tmp_path / 'run'}",
            f"--model-preset-dir={tmp_path / 'not-a-preset'}"]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("tokenpulse up: error:")
    assert "--model-preset-dir" in done.stderr and "is not a keras_hub preset" in done.stderr
    assert not (tmp_path / "run").exists()  # nothing prepared, nothing started


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"preset": "tiny"}, "give one of them"),
        ({"canary_degrade_noise": 2.0}, "an imported model has no degraded build"),
    ],
)
def test_settings_the_imported_model_cannot_honour_are_refused(tmp_path, extra, why) -> None:
    with pytest.raises(ValidationError, match=why):
        up_settings(tmp_path, model_preset_dir=_preset(tmp_path / "p"), **extra)


def test_the_stack_description_and_banner_name_the_imported_model(tmp_path: Path) -> None:
    preset = _preset(tmp_path / "my-preset")
    s = up_settings(tmp_path, model_preset_dir=preset)
    _version(s.models_dir / "gen", 1, _imported(preset))
    config = plan.stack_config(s)
    assert config.model_preset_dir == preset.resolve()
    assert config.gateway["context_window_tokens"] == 128
    doc = json.loads(json.dumps(config.to_json()))  # stack.json
    assert doc["model_preset_dir"] == str(preset.resolve())
    assert StackConfig.from_json(doc) == config
    pids = {name: 1000 + i for i, name in enumerate(components.names())}
    text = up_banner.banner(s, config, "tp-demo", pids)
    assert f"Model gen: GPT2CausalLM imported from the keras_hub preset {preset.resolve()}" in text


def test_our_own_model_is_named_in_the_banner_and_recorded_as_none(tmp_path: Path) -> None:
    s = up_settings(tmp_path)
    _version(s.models_dir / "gen", 1, {"model": {"context": 64}, "degrade_noise": 0.0})
    config = plan.stack_config(s)
    assert config.model_preset_dir is None and config.to_json()["model_preset_dir"] is None
    pids = {name: 1000 + i for i, name in enumerate(components.names())}
    text = up_banner.banner(s, config, "tp-demo", pids)
    assert "Model gen: TokenPulse's own model (window 64 tokens)" in text
