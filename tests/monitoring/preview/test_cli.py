"""`tokenpulse dashboards preview` (monitoring/preview/cli.py): the command the stack CLI routes."""

from __future__ import annotations

from pathlib import Path

import pytest

from stack.cli import main as cli
from tokenpulse.procs import free_port


def test_an_unreachable_prometheus_is_one_line_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    argv = ["dashboards", "preview", "--prometheus", url, "--out", str(tmp_path / "png")]
    assert cli(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("tokenpulse dashboards preview: ") and err.count("\n") == 1
    assert not list(tmp_path.rglob("*.png"))


def test_help_names_it_a_preview(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli(["dashboards", "preview", "--help"])
    assert exit_.value.code == 0
    assert "not a Grafana replacement" in capsys.readouterr().out
