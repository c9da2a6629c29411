"""The status tracker: state changes with their times, config reloads, failures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from devtools.standins.tfserving import TfServingStandin
from exporter.tfserving.client import TfServingClient
from exporter.tfserving.models import ConfigTargets, ModelEntry, StaticTargets
from exporter.tfserving.status import StatusTracker
from tokenpulse.tfserving.errors import ConfigError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def tfs():
    with TfServingStandin() as standin:
        standin.state.versions["gen"] = {1: "AVAILABLE"}
        yield standin


def _tracker(tfs, clock, base: Path | None = None) -> StatusTracker:
    targets = StaticTargets([ModelEntry("gen", base, {})])
    return StatusTracker(TfServingClient(tfs.url), targets, clock=clock)


def test_change_times_follow_state_changes(tfs):
    clock = Clock()
    tracker = _tracker(tfs, clock)
    changes = []
    tracker.add_listener(lambda: changes.append(clock.now))
    [gen] = tracker.poll().models
    assert gen.up and gen.changed_at == {1: 1000.0} and gen.model_changed_at == 1000.0

    clock.now = 1010.0
    [gen] = tracker.poll().models  # nothing changed
    assert gen.changed_at == {1: 1000.0} and gen.model_changed_at == 1000.0

    clock.now = 1020.0
    tfs.state.versions["gen"] = {1: "AVAILABLE", 2: "LOADING"}
    [gen] = tracker.poll().models
    assert gen.changed_at == {1: 1000.0, 2: 1020.0}

    clock.now = 1030.0
    tfs.state.versions["gen"] = {1: "UNLOADING", 2: "AVAILABLE"}
    [gen] = tracker.poll().models
    assert gen.changed_at == {1: 1030.0, 2: 1030.0}
    assert gen.available_versions() == [2]
    assert gen.model_changed_at == 1030.0

    clock.now = 1040.0
    tfs.state.versions["gen"] = {2: "AVAILABLE"}  # version 1 left the list
    [gen] = tracker.poll().models
    assert gen.model_changed_at == 1040.0
    assert changes == [1000.0, 1020.0, 1030.0, 1040.0]


def test_server_down_is_reported_per_model():
    with TfServingStandin() as standin:
        url = standin.url
    tracker = StatusTracker(TfServingClient(url, 0.5), StaticTargets([ModelEntry("gen", None, {})]))
    [gen] = tracker.poll().models
    assert not gen.up and "refused" in (gen.error or "")


def _write_config(path: Path, labels: str, mtime: int) -> None:
    path.write_text(
        "model_config_list { config { name: 'gen' base_path: '/m/gen' " + labels + " } }"
    )
    os.utime(path, ns=(mtime, mtime))


def test_config_file_is_reread_when_it_changes(tmp_path):
    cfg = tmp_path / "models.config"
    _write_config(cfg, "version_labels { key: 'stable' value: 1 }", 1_000_000_000)
    targets = ConfigTargets(cfg)
    [entry], error = targets.read()
    assert entry.labels == {"stable": 1} and error is None

    _write_config(cfg, "version_labels { key: 'stable' value: 2 }", 2_000_000_000)
    [entry], error = targets.read()
    assert entry.labels == {"stable": 2} and error is None

    cfg.write_text("model_config_list { config { name: 'gen' ")
    os.utime(cfg, ns=(3_000_000_000, 3_000_000_000))
    [entry], error = targets.read()
    assert entry.labels == {"stable": 2}  # the last good config stays in force
    assert error is not None and "unexpected end of file" in error


def test_bad_config_at_start_up_is_fatal(tmp_path):
    cfg = tmp_path / "models.config"
    cfg.write_text("nonsense {")
    with pytest.raises(ConfigError):
        ConfigTargets(cfg)
