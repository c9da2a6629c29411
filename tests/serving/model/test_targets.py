"""A training run's targets file: its workers while it runs, gone once it ended on purpose."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from serving.model import targets
from serving.model.settings import TrainSettings


def test_register_lists_every_worker_and_unregister_removes_the_file(tmp_path) -> None:
    folder, run = tmp_path / "targets", tmp_path / "runs" / "tiny"
    path = targets.register(folder, run, "127.0.0.1", 9500, 2)
    assert json.loads(path.read_text()) == [
        {"targets": ["127.0.0.1:9500", "127.0.0.1:9501"], "labels": {"run": "tiny"}}
    ]
    assert list(folder.glob("*.json")) == [path]  # no temporary file left beside it
    # another run of the same name elsewhere gets its own file
    other = targets.register(folder, tmp_path / "elsewhere" / "tiny", "127.0.0.1", 9600, 1)
    assert other != path and other.name.startswith("tiny-")
    targets.unregister(folder, run)
    targets.unregister(folder, run)  # twice is fine: a run may end without its file
    assert list(folder.glob("*.json")) == [other]


def test_the_glob_has_its_wildcard_in_the_file_name_only() -> None:
    """Prometheus refuses a file_sd path with a wildcard in a directory (the config fails)."""
    directory, _, name = targets.TARGETS_GLOB.rpartition("/")
    assert "*" not in directory and name.endswith(".json")


@pytest.mark.parametrize(
    ("host", "wanted"),
    [("training", "training:9412"), ("10.0.0.7", "10.0.0.7:9412"), ("::1", "[::1]:9412")],
)
def test_the_targets_name_the_host_prometheus_reaches(host: str, wanted: str) -> None:
    """Inside compose the worker is `training`, not the scraping container's own loopback."""
    (group,) = targets.targets(Path("/training/run"), host, 9412, 1)
    assert group == {"targets": [wanted], "labels": {"run": "run"}}


def test_the_targets_folder_is_the_caches_unless_given(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert TrainSettings(cache_dir=cache).targets_path() == cache / targets.TARGETS_DIR
    given = TrainSettings(cache_dir=cache, targets_dir=tmp_path / "shared")
    assert given.targets_path() == tmp_path / "shared"


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "training:9412", "http://training", "a b"])
def test_a_metrics_host_prometheus_cannot_scrape_is_refused(host: str) -> None:
    with pytest.raises(ValidationError, match="metrics.host|metrics_host"):
        TrainSettings(metrics_host=host)


def test_the_metrics_host_defaults_to_loopback() -> None:
    assert TrainSettings().metrics_host == "127.0.0.1"
    assert TrainSettings(metrics_host="training").metrics_host == "training"
