"""A training run's targets file: its workers while it runs, gone once it ended on purpose."""

from __future__ import annotations

import json

from serving.model import targets


def test_register_lists_every_worker_and_unregister_removes_the_file(tmp_path) -> None:
    run = tmp_path / "runs" / "tiny"
    path = targets.register(run, 9500, 2)
    assert path == run / targets.TARGETS_FILE
    assert json.loads(path.read_text()) == [
        {"targets": ["127.0.0.1:9500", "127.0.0.1:9501"], "labels": {"run": "tiny"}}
    ]
    assert path in tmp_path.glob(targets.TARGETS_GLOB)
    targets.unregister(run)
    targets.unregister(run)  # twice is fine: a run may end without its file
    assert not path.exists()
