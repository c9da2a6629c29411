"""`tokenpulse model ...` through the real console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from serving.model.settings import BuildSettings
from stack.cli import build_parser
from tests.support.models import contract_model
from tokenpulse.settings_cli import settings_from_args

TOKENPULSE = [sys.executable, "-m", "stack.cli"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TOKENPULSE, *args], capture_output=True, text=True, timeout=300)


def test_generate_prints_text_and_signals(model_base: Path) -> None:
    proc = run(
        "model",
        "generate",
        "--base-path",
        str(model_base),
        "--temperature",
        "0",
        "--max-new-tokens",
        "8",
        "--json",
        "Return the",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["version"] == 1 and 1 < out["prompt_tokens"] < len("Return the")  # subwords
    assert out["finish_reason"] in ("stop", "length") and out["mean_nll"] >= 0
    assert out["stop_index"] == -1
    assert len(out["text"]) >= 3 and "\ufffd" not in out["text"][:3]
    stop = out["text"][:3]  # the first 3 characters: they end there first, within 3 tokens
    flags = ["--base-path", str(model_base), "--temperature", "0", "--max-new-tokens", "8"]
    proc = run(
        "model", "generate", *flags, "--ignore-eos", "--stop", "\x01", stop, "--json", "Return the"
    )
    assert proc.returncode == 0, proc.stderr
    stopped = json.loads(proc.stdout)
    assert (stopped["text"], stopped["finish_reason"]) == ("", "stop")
    assert 1 <= stopped["output_tokens"] <= 3
    assert stopped["stop_index"] == 1


def test_bad_arguments_give_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    proc = run("model", "build", "--preset", "huge", "--base-path", str(tmp_path), "--version", "1")
    assert proc.returncode == 2
    assert proc.stderr.startswith("tokenpulse model build: error: --preset (env TOKENPULSE_MODEL")
    assert "unknown preset 'huge'" in proc.stderr and "Traceback" not in proc.stderr
    missing = run("model", "generate", "--base-path", str(tmp_path / "nope"), "hi")
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_a_missing_version_or_a_file_for_base_path_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "gen" / "1").mkdir(parents=True)  # a version directory without a SavedModel
    (tmp_path / "file").write_text("x")
    missing = run("model", "generate", "--base-path", str(tmp_path / "gen"), "--version", "1", "hi")
    assert missing.returncode == 1 and "no SavedModel of version 1 under" in missing.stderr
    a_file = run("model", "generate", "--base-path", str(tmp_path / "file"), "hi")
    assert a_file.returncode == 1 and "is not a directory" in a_file.stderr
    assert "Traceback" not in missing.stderr + a_file.stderr


def test_existing_version_is_not_overwritten_silently(model_base: Path) -> None:
    proc = run(
        "model",
        "build",
        "--preset",
        "tiny",
        "--base-path",
        str(model_base),
        "--version",
        "1",
        "--no-progress",
    )
    assert proc.returncode == 1 and "already exists" in proc.stderr


def test_keep_existing_leaves_a_complete_version_and_exits_0(model_base: Path) -> None:
    """A rerun (a Kubernetes Job retried or re-applied) finds its version there and is done."""
    before = sorted((p.name, p.stat().st_mtime_ns) for p in (model_base / "1").rglob("*"))
    proc = run(
        "model", "build", "--preset", "tiny", "--base-path", str(model_base), "--version", "1",
        "--no-progress", "--keep-existing",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"path": str(model_base / "1"), "kept": True}
    assert sorted((p.name, p.stat().st_mtime_ns) for p in (model_base / "1").rglob("*")) == before
    both = run(
        "model", "build", "--base-path", str(model_base), "--version", "1",
        "--keep-existing", "--overwrite",
    )  # fmt: skip
    assert both.returncode == 2 and "Traceback" not in both.stderr


def test_cli_help_does_not_import_tensorflow() -> None:
    code = (
        "import sys; from stack.cli import build_parser; build_parser(); "
        "print('tensorflow' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "False", proc.stderr


def _build_settings(argv: list[str]) -> BuildSettings:
    args = build_parser(["model", "build", *argv]).parse_args(["model", "build", *argv])
    settings: BuildSettings = settings_from_args(BuildSettings, args)
    return settings


def test_env_vars_fill_what_flags_leave_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKENPULSE_MODEL_PRESET", "tiny")  # ignored while flags had defaults
    monkeypatch.setenv("TOKENPULSE_MODEL_VERSION", "3")
    settings = _build_settings(["--base-path", str(tmp_path)])
    assert (settings.preset, settings.version, settings.progress) == ("tiny", 3, True)
    settings = _build_settings(["--base-path", str(tmp_path), "--preset", "default", "--version=4"])
    assert (settings.preset, settings.version) == ("default", 4)  # flags beat env


def test_help_shows_descriptions_and_defaults() -> None:
    proc = run("model", "build", "--help")
    text = " ".join(proc.stdout.split())
    assert "--preset PRESET model size: tiny | default (default: default; env" in text
    assert "--no-progress show training progress (default: true; env" in text
    assert "(default: required; env TOKENPULSE_MODEL_BASE_PATH)" in text


def test_the_command_exits_2_with_one_line_for_no_saved_model(tmp_path: Path) -> None:
    proc = run("model", "check", str(tmp_path / "nothing"))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"tokenpulse model check: error: {tmp_path / 'nothing'} is not a directory"
    ]


def test_the_command_prints_json_and_exits_1_on_a_break(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from serving.model.cli import main

    path = contract_model(tmp_path / "m", drop=("serving_default.text",))
    args = build_parser().parse_args(["model", "check", str(path), "--json"])
    assert main(args) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["servable"] is False and doc["degraded"] == []
    assert {
        "level": "error",
        "check": "contract",
        "subject": "serving_default.text",
        "message": "output missing",
    } in doc["findings"]
