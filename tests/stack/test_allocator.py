"""stack/allocator.py: launched components preload tcmalloc where it is installed, or not at all."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from stack import allocator, cli
from stack.launch import LaunchError, launch_env, running_gateway


def test_the_library_is_first_in_ld_preload_once_and_others_are_kept() -> None:
    lib = Path("/opt/lib/libtcmalloc_minimal.so.4")
    env = allocator.preloading({"LD_PRELOAD": "/opt/other.so"}, lib)
    assert env["LD_PRELOAD"] == f"{lib} /opt/other.so"
    assert allocator.preloading(env, lib) == env  # already there: unchanged
    assert allocator.preloading({"A": "1"}, None) == {"A": "1"}  # nothing installed: as it was


def test_off_leaves_glibc_and_a_bad_value_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.setenv("TOKENPULSE_TCMALLOC", "off")
    assert "LD_PRELOAD" not in launch_env()
    monkeypatch.setenv("TOKENPULSE_TCMALLOC", "always")
    with pytest.raises(LaunchError, match=r"^TOKENPULSE_TCMALLOC='always' is not valid: .*auto"):
        launch_env()
    monkeypatch.setenv("TOKENPULSE_TCMALLOC", "a" * 100_000)  # echoed cut, not whole
    with pytest.raises(allocator.AllocatorError) as caught:
        allocator.settings()
    assert len(str(caught.value)) < 300 and "(100000 characters)" in str(caught.value)


@pytest.mark.parametrize("argv", [["up"], ["bench", "launch"]])
def test_a_bad_value_stops_a_command_at_its_start(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TOKENPULSE_TCMALLOC", "yes")
    assert cli.main([*argv, f"--run-dir={tmp_path / 'run'}"] if argv == ["up"] else argv) == 2
    err = capsys.readouterr().err
    one_line = r"tokenpulse[a-z ]*: error: TOKENPULSE_TCMALLOC='yes' is not valid: .*'off'\n"
    assert re.fullmatch(one_line, err)
    assert not (tmp_path / "run").exists()  # up built no model, made no run folder


def test_a_component_forked_from_the_runs_zygote_runs_on_tcmalloc(tmp_path: Path) -> None:
    assert allocator.tcmalloc_path() is not None, "scripts/ensure-debs.sh installs it"
    keys = tmp_path / "keys.json"
    keys.write_text('{"keys": []}')
    with running_gateway("http://127.0.0.1:9", keys) as gw:
        assert allocator.loaded(gw.pid)


@pytest.mark.parametrize(("setting", "expected"), [("auto", True), ("off", False)])
def test_an_execd_launch_preloads_it_unless_off(
    setting: str, expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LD_PRELOAD", raising=False)  # the run's own, set by tests/conftest.py
    monkeypatch.setenv("TOKENPULSE_TCMALLOC", setting)
    code = "print('up', flush=True); import time; time.sleep(30)"
    with subprocess.Popen(
        [sys.executable, "-c", code], env=launch_env(), stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline() == "up\n"
            assert allocator.loaded(child.pid) is expected
        finally:
            child.kill()
