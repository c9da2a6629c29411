"""degraded-canary's version without a stack: built only when missing, always carrying the stable
version's golden answers. The drill itself runs in tests/stack/test_drill.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from stack.drill.canary import DEGRADE_NOISE, DEGRADED_VERSION, _restore, ensure_degraded
from stack.drill.target import DrillError
from stack.up import files
from stack.up.files import META_FILE
from tokenpulse.tfserving.signature import GOLDEN_FILE


def _version(base: Path, version: int, golden: str, preset: str | None = "tiny") -> Path:
    path = base / str(version)
    (path / "assets.extra").mkdir(parents=True)
    (path / "saved_model.pb").write_bytes(b"not read here")
    (path / GOLDEN_FILE).write_text(golden)
    if preset is not None:
        (path / META_FILE).write_text(json.dumps({"train": {"preset": preset}}))
    return path


def test_an_installed_degraded_version_gets_stables_golden_answers_and_no_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _version(tmp_path, 1, '{"stable": true}')
    _version(tmp_path, DEGRADED_VERSION, '{"its own broken answers": true}')
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("built"))
    path = ensure_degraded(tmp_path, 1)
    assert path == tmp_path / str(DEGRADED_VERSION)
    assert (path / GOLDEN_FILE).read_text() == '{"stable": true}'


def test_a_missing_degraded_version_is_built_from_stables_preset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _version(tmp_path, 1, '{"stable": true}', preset="default")
    calls: list[list[str]] = []

    def build(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        _version(tmp_path, DEGRADED_VERSION, '{"its own": true}')
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(files.subprocess, "run", build)
    ensure_degraded(tmp_path, 1)
    [argv] = calls
    flags = argv[argv.index("build") + 1 :]
    assert flags == [
        "--preset", "default", "--base-path", str(tmp_path), "--version", str(DEGRADED_VERSION),
        "--degrade-noise", f"{DEGRADE_NOISE:g}",
    ]  # fmt: skip
    assert (tmp_path / str(DEGRADED_VERSION) / GOLDEN_FILE).read_text() == '{"stable": true}'


def test_a_failed_build_or_an_unknown_preset_is_a_drill_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _version(tmp_path, 1, "{}")
    monkeypatch.setattr(
        files.subprocess, "run", lambda argv, **_: subprocess.CompletedProcess(argv, 1)
    )
    with pytest.raises(DrillError, match=f"degraded version: building version {DEGRADED_VERSION}"):
        ensure_degraded(tmp_path, 1)
    _version(tmp_path, 2, "{}", preset=None)
    with pytest.raises(DrillError, match="cannot tell the preset"):
        ensure_degraded(tmp_path, 2)
    _version(tmp_path, DEGRADED_VERSION, "{}")
    (tmp_path / "1" / GOLDEN_FILE).unlink()  # exported before golden answers existed
    with pytest.raises(DrillError, match="golden answers"):
        ensure_degraded(tmp_path, 1)


def test_a_restored_file_keeps_its_mode_and_a_missing_one_goes_again(tmp_path: Path) -> None:
    path = tmp_path / "models.config"
    path.write_text("the drill's labels\n")
    path.chmod(0o644)  # the model server and the gateway may run as another user
    _restore(path, "the saved labels\n")
    assert path.read_text() == "the saved labels\n"
    assert path.stat().st_mode & 0o777 == 0o644
    _restore(path, None)
    assert not path.exists() and list(tmp_path.iterdir()) == []
