"""`tokenpulse model import keras-hub`: what is no importable preset gets one line, not a trace."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stack.cli import main
from tests.support.hub import cached_gpt2_preset, cached_qwen_preset


def import_error(capsys: pytest.CaptureFixture[str], preset: Path, base: Path) -> str:
    """Run the command; it must fail with exactly one line on stderr, which is returned."""
    code = main(["model", "import", "keras-hub", str(preset), "--base-path", str(base),
                 "--version", "1", "--warmup-batch-sizes", "1"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code != 0 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("tokenpulse model import: error: ")
    return err.strip()


@pytest.fixture(scope="module")
def preset() -> Path:
    return cached_gpt2_preset()


def copy_of(preset: Path, target: Path) -> Path:
    shutil.copytree(preset, target)
    return target


def test_a_directory_that_does_not_exist(capsys, tmp_path: Path) -> None:
    err = import_error(capsys, tmp_path / "nope", tmp_path / "base")
    assert err.endswith(f"{tmp_path / 'nope'} does not exist")
    assert not (tmp_path / "base").exists()


def test_a_directory_that_is_no_preset(capsys, tmp_path: Path) -> None:
    (tmp_path / "weights.h5").write_bytes(b"")
    err = import_error(capsys, tmp_path, tmp_path / "base")
    assert err.endswith("is not a keras_hub preset: no config.json, metadata.json")


def test_a_backbone_only_preset_is_no_causal_lm(capsys, preset: Path, tmp_path: Path) -> None:
    backbone = copy_of(preset, tmp_path / "backbone")
    (backbone / "task.json").unlink()
    err = import_error(capsys, backbone, tmp_path / "base")
    assert err.endswith("holds a backbone only (no task.json): not a causal LM")


def test_a_task_of_another_kind_is_refused_by_name(capsys, preset: Path, tmp_path: Path) -> None:
    other = copy_of(preset, tmp_path / "classifier")
    task = json.loads((other / "task.json").read_text())
    (other / "task.json").write_text(json.dumps(task | {"class_name": "BertTextClassifier"}))
    err = import_error(capsys, other, tmp_path / "base")
    assert err.endswith(
        "is a BertTextClassifier preset; importable causal LMs: GPT2CausalLM, QwenCausalLM"
    )


def test_a_version_that_exists_is_never_overwritten(capsys, preset: Path, tmp_path: Path) -> None:
    (tmp_path / "base" / "1").mkdir(parents=True)
    (tmp_path / "base" / "1" / "saved_model.pb").write_bytes(b"kept")
    err = import_error(capsys, preset, tmp_path / "base")
    assert err.endswith("already exists; versions are immutable")
    assert (tmp_path / "base" / "1" / "saved_model.pb").read_bytes() == b"kept"


def test_a_qwen_with_a_window_narrower_than_its_context_is_refused(capsys, tmp_path: Path) -> None:
    narrow = copy_of(cached_qwen_preset(), tmp_path / "sliding")
    sliding = {"use_sliding_window_attention": True, "sliding_window_size": 16}
    config, task = (json.loads((narrow / n).read_text()) for n in ("config.json", "task.json"))
    config["config"] |= sliding
    task["config"]["backbone"]["config"] |= sliding  # the task loads its own copy
    (narrow / "config.json").write_text(json.dumps(config))
    (narrow / "task.json").write_text(json.dumps(task))
    err = import_error(capsys, narrow, tmp_path / "base")
    assert err.endswith("sliding-window attention (16 < the window 128) is not importable: "
                        "keras_hub masks it from a shared cache index")  # fmt: skip
    assert not (tmp_path / "base").exists()
