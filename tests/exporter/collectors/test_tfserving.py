"""The tfserving collector: state sets, labels, up, change times; faults become success 0."""

from __future__ import annotations

import pytest

from devtools.standins.tfserving import TfServingStandin
from exporter.collectors.tfserving import TfServingCollector
from exporter.scrape import ScrapeCollector
from exporter.tfserving.client import TfServingClient
from exporter.tfserving.models import ModelEntry, StaticTargets
from exporter.tfserving.status import StatusTracker
from tests.support.exporter import one_scrape, registry_of
from tokenpulse.tfserving.status import VERSION_STATES

SUCCESS = ("tokenpulse_exporter_collector_success", {"collector": "tfserving"})


class Clock:
    now = 5000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def tfs():
    with TfServingStandin() as standin:
        standin.state.versions["gen"] = {1: "AVAILABLE", 2: "LOADING"}
        yield standin


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def tracker(tfs, clock):
    entry = ModelEntry("gen", None, {"stable": 1, "canary": 2})
    return StatusTracker(TfServingClient(tfs.url, 1.0), StaticTargets([entry]), clock=clock)


def _registry(tracker, clock):
    return registry_of(ScrapeCollector({"tfserving": TfServingCollector(tracker, 20.0, clock)}))


def test_state_set_per_version(tracker, clock):
    tracker.poll()
    reg = one_scrape(_registry(tracker, clock))
    states = {
        (v, s): reg.get_sample_value(
            "tokenpulse_tfserving_model_version_state", {"model": "gen", "version": v, "state": s}
        )
        for v in ("1", "2")
        for s in VERSION_STATES
    }
    assert {k for k, on in states.items() if on == 1} == {("1", "AVAILABLE"), ("2", "LOADING")}
    assert all(on in (0, 1) for on in states.values())
    assert reg.get_sample_value("tokenpulse_tfserving_up", {"model": "gen"}) == 1
    assert (
        reg.get_sample_value("tokenpulse_tfserving_model_versions_available", {"model": "gen"}) == 1
    )
    assert reg.get_sample_value(*SUCCESS) == 1


def test_labels_and_change_times(tfs, tracker, clock):
    tracker.poll()
    clock.now = 5060.0
    tfs.state.versions["gen"] = {1: "AVAILABLE", 2: "AVAILABLE"}
    tracker.poll()
    reg = one_scrape(_registry(tracker, clock))
    assert (
        reg.get_sample_value(
            "tokenpulse_tfserving_model_label_version", {"model": "gen", "label": "canary"}
        )
        == 2
    )
    assert (
        reg.get_sample_value(
            "tokenpulse_tfserving_model_label_version", {"model": "gen", "label": "stable"}
        )
        == 1
    )
    change = "tokenpulse_tfserving_model_version_state_change_timestamp_seconds"
    assert reg.get_sample_value(change, {"model": "gen", "version": "1"}) == 5000.0
    assert reg.get_sample_value(change, {"model": "gen", "version": "2"}) == 5060.0
    assert (
        reg.get_sample_value(
            "tokenpulse_tfserving_model_state_change_timestamp_seconds", {"model": "gen"}
        )
        == 5060.0
    )
    assert reg.get_sample_value("tokenpulse_tfserving_status_poll_timestamp_seconds") == 5060.0


def test_model_server_down(tfs, tracker, clock):
    tfs.stop()
    tracker.poll()
    reg = one_scrape(_registry(tracker, clock))
    assert reg.get_sample_value("tokenpulse_tfserving_up", {"model": "gen"}) == 0
    assert reg.get_sample_value(*SUCCESS) == 0
    # never seen and nothing answers: the labelled versions still show, in state UNKNOWN
    assert _states(reg, "1") == {"UNKNOWN"} and _states(reg, "2") == {"UNKNOWN"}


def _states(reg, version: str) -> set[str]:
    labels = {"model": "gen", "version": version}
    name = "tokenpulse_tfserving_model_version_state"
    return {s for s in VERSION_STATES if reg.get_sample_value(name, {**labels, "state": s}) == 1}


def test_versions_seen_before_an_outage_stay_in_state_unknown(tfs, clock):
    entry = ModelEntry("gen", None, {})
    client = TfServingClient(tfs.url, 1.0)
    tracker = StatusTracker(client, StaticTargets([entry]), clock=clock, retention_s=100.0)
    tracker.poll()
    assert _states(one_scrape(_registry(tracker, clock)), "1") == {"AVAILABLE"}
    tfs.stop()
    clock.now += 50
    tracker.poll()
    reg = one_scrape(_registry(tracker, clock))
    assert _states(reg, "1") == {"UNKNOWN"}  # was AVAILABLE 50 s ago: kept
    assert _states(reg, "2") == set()  # only ever LOADING: nothing to keep
    clock.now += 100
    tracker.poll()
    assert _states(one_scrape(_registry(tracker, clock)), "1") == set()  # no longer recent


def test_malformed_status_json(tfs, tracker, clock):
    tfs.state.status_mode = "malformed"
    tracker.poll()
    reg = one_scrape(_registry(tracker, clock))
    assert reg.get_sample_value("tokenpulse_tfserving_up", {"model": "gen"}) == 0
    assert reg.get_sample_value(*SUCCESS) == 0
    tfs.state.status_mode = "ok"
    tracker.poll()
    assert _registry(tracker, clock).get_sample_value(*SUCCESS) == 1


def test_no_poll_yet_and_stale_polls_fail_the_collector(tracker, clock):
    assert _registry(tracker, clock).get_sample_value(*SUCCESS) == 0
    tracker.poll()
    assert _registry(tracker, clock).get_sample_value(*SUCCESS) == 1
    clock.now += 21  # the poller stopped: its last answer is no longer the truth
    assert _registry(tracker, clock).get_sample_value(*SUCCESS) == 0


def test_unknown_model_is_up_with_no_versions(tfs, tracker, clock):
    tfs.state.versions.clear()
    tracker.poll()
    reg = one_scrape(_registry(tracker, clock))
    assert reg.get_sample_value("tokenpulse_tfserving_up", {"model": "gen"}) == 1
    assert (
        reg.get_sample_value("tokenpulse_tfserving_model_versions_available", {"model": "gen"}) == 0
    )


def test_failed_load_shows_in_status_ok(tfs, tracker, clock):
    tfs.state.versions["gen"] = {1: "AVAILABLE", 2: "END"}
    tfs.state.errors[("gen", 2)] = ("NOT_FOUND", "no servable found in /m/gen/2")
    tracker.poll()
    reg = one_scrape(_registry(tracker, clock))
    ok = "tokenpulse_tfserving_model_version_status_ok"
    assert reg.get_sample_value(ok, {"model": "gen", "version": "1"}) == 1
    assert reg.get_sample_value(ok, {"model": "gen", "version": "2"}) == 0
    assert reg.get_sample_value(*SUCCESS) == 1  # a failed load is data, not a collector failure
