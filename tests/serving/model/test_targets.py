"""A training run's targets file: its workers while it runs, gone once it ended on purpose."""

from __future__ import annotations

import json

from serving.model import targets


def test_register_lists_every_worker_and_unregister_removes_the_file(tmp_path) -> None:
    cache, run = tmp_path / "cache", tmp_path / "runs" / "tiny"
    path = targets.register(cache, run, 9500, 2)
    assert json.loads(path.read_text()) == [
        {"targets": ["127.0.0.1:9500", "127.0.0.1:9501"], "labels": {"run": "tiny"}}
    ]
    assert list(cache.glob(targets.TARGETS_GLOB)) == [path]  # no temporary file left beside it
    # another run of the same name elsewhere gets its own file
    other = targets.register(cache, tmp_path / "elsewhere" / "tiny", 9600, 1)
    assert other != path and other.name.startswith("tiny-")
    targets.unregister(cache, run)
    targets.unregister(cache, run)  # twice is fine: a run may end without its file
    assert list(cache.glob(targets.TARGETS_GLOB)) == [other]


def test_the_glob_has_its_wildcard_in_the_file_name_only() -> None:
    """Prometheus refuses a file_sd path with a wildcard in a directory (the config fails)."""
    directory, _, name = targets.TARGETS_GLOB.rpartition("/")
    assert "*" not in directory and name.endswith(".json")
