"""The canary weight file: read, applied on change, bad content kept out, removal restores."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from serving.gateway.admin import (
    CanaryWeightFile,
    CanaryWeightFileError,
    parse_canary_weight,
    write_canary_weight,
)
from serving.gateway.routing import Router


@pytest.mark.parametrize(
    "text", ['{"canary_weight": 1.5}', '{"canary_weight": true}', "[0.5]", "0.5 %", "{}"]
)
def test_only_a_weight_from_0_to_1_is_accepted(text: str) -> None:
    with pytest.raises(CanaryWeightFileError):
        parse_canary_weight(text)


def test_the_file_steers_the_router_and_its_removal_restores_the_start_up_weight(
    tmp_path: Path,
) -> None:
    path = tmp_path / "canary-weight.json"
    router = Router(["gen"], canary_weight=0.05)
    watcher = CanaryWeightFile(path, router, default=0.05)
    watcher.check()
    assert router.canary_weight == 0.05  # no file yet: the setting

    write_canary_weight(path, 0.25)
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    watcher.check()
    assert router.canary_weight == 0.25

    path.write_text('{"canary_weight": "lots"}')
    os.utime(path, ns=(1, 1))  # a changed stamp even within one clock tick
    watcher.check()
    assert router.canary_weight == 0.25  # a bad file keeps the last good weight

    path.unlink()
    watcher.check()
    assert router.canary_weight == 0.05


def test_writing_refuses_a_weight_out_of_range(tmp_path: Path) -> None:
    with pytest.raises(CanaryWeightFileError):
        write_canary_weight(tmp_path / "w.json", 1.01)
    assert list(tmp_path.iterdir()) == []
