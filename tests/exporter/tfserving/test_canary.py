"""The canary runner: golden prompts per AVAILABLE version, match, similarity, NLL, errors."""

from __future__ import annotations

import json

import pytest

from devtools.standins.tfserving import TfServingStandin
from exporter.collectors.canary import CanaryCollector
from exporter.tfserving.canary import CanaryRunner, GoldenError, load_golden
from exporter.tfserving.client import TfServingClient
from exporter.tfserving.models import ModelEntry, StaticTargets
from exporter.tfserving.status import StatusTracker
from tests.support.exporter import one_scrape, registry_of, write_golden

PROMPTS = [("The sky is", " blue today", 1.5), ("Once upon", " a time", 0.5)]


@pytest.fixture
def tfs():
    with TfServingStandin() as standin:
        standin.state.versions["gen"] = {1: "AVAILABLE"}
        standin.state.answers[("gen", 1)] = {p: (t, n) for p, t, n in PROMPTS}
        yield standin


@pytest.fixture
def base(tmp_path):
    write_golden(tmp_path, 1, PROMPTS)
    return tmp_path


RETENTION_S = 100.0


class Clock:
    def __init__(self) -> None:
        self.now = 42.0

    def __call__(self) -> float:
        return self.now


def _runner(tfs, base, clock=None, entry=None) -> tuple[StatusTracker, CanaryRunner]:
    clock = clock or Clock()
    client = TfServingClient(tfs.url, timeout_s=2.0)
    targets = StaticTargets([entry or ModelEntry("gen", base, {})])
    tracker = StatusTracker(client, targets, clock=clock, retention_s=RETENTION_S)
    return tracker, CanaryRunner(client, tracker, 60, 5, clock=clock)


def test_matching_version(tfs, base):
    tracker, runner = _runner(tfs, base)
    tracker.poll()
    [r] = runner.run_once()
    assert (r.model, r.version, r.result, r.matched, r.prompts) == ("gen", 1, "ok", 2, 2)
    assert r.similarity == 1.0
    assert r.mean_nll == pytest.approx(1.0) and r.golden_mean_nll == pytest.approx(1.0)
    assert r.latency_s is not None and r.latency_s > 0
    assert r.mismatch_nll_delta == 0
    assert runner.runs() == {("gen", 1, "ok"): 1}


def test_degraded_answers_are_a_mismatch_with_higher_nll(tfs, base):
    tfs.state.answers[("gen", 1)] = {
        "The sky is": (" blue tod@y", 4.0),
        "Once upon": (" a time", 2.0),
    }
    tracker, runner = _runner(tfs, base)
    tracker.poll()
    [r] = runner.run_once()
    assert r.result == "mismatch" and r.matched == 1
    assert 0.5 < r.similarity < 1.0
    assert r.mean_nll == pytest.approx(3.0)
    assert r.mean_nll > r.golden_mean_nll
    assert r.mismatch_nll_delta == pytest.approx(4.0 - 1.5)  # only the diverging prompt counts


def test_requests_are_greedy_and_target_the_exact_version(tfs, base, monkeypatch):
    seen = []
    original = TfServingClient.predict

    def spy(self, model, version, rows, timeout_s):
        seen.append((model, version, rows))
        return original(self, model, version, rows, timeout_s)

    monkeypatch.setattr(TfServingClient, "predict", spy)
    tracker, runner = _runner(tfs, base)
    tracker.poll()
    runner.run_once()
    model, version, [row] = seen[0]
    assert (model, version) == ("gen", 1)
    assert row == {
        "prompt": "The sky is",
        "max_new_tokens": 8,
        "temperature": 0.0,
        "top_k": 0,
        "top_p": 1.0,
        "seed": 0,
    }


def test_only_available_versions_are_probed_and_an_unloaded_one_drops_its_result(tfs, base):
    write_golden(base, 2, PROMPTS)
    tfs.state.answers[("gen", 2)] = tfs.state.answers[("gen", 1)]
    tfs.state.versions["gen"] = {1: "AVAILABLE", 2: "LOADING"}
    clock = Clock()
    tracker, runner = _runner(tfs, base, clock)
    tracker.poll()
    assert [r.version for r in runner.run_once()] == [1]
    tfs.state.versions["gen"] = {1: "UNLOADING", 2: "AVAILABLE"}
    clock.now += 10
    tracker.poll()
    assert [r.version for r in runner.run_once()] == [2]
    # the answering server unloaded version 1 (a rollback): its last result goes at once, or a
    # mismatch would hold its alert for the retention after the rollback
    assert [r.version for r in runner.results()] == [2]
    assert set(runner.runs()) == {("gen", 2, "ok")}


def _success(runner: CanaryRunner) -> dict[str, float | None]:
    reg = one_scrape(registry_of(CanaryCollector(runner, 1e12)))
    return {
        v: reg.get_sample_value("tokenpulse_canary_success", {"model": "gen", "version": v})
        for v in ("1", "2")
    }


def _runs(runner: CanaryRunner, result: str) -> float | None:
    reg = one_scrape(registry_of(CanaryCollector(runner, 1e12)))
    labels = {"model": "gen", "version": "1", "result": result}
    return reg.get_sample_value("tokenpulse_canary_runs_total", labels)


def test_outage_fails_the_first_run_keeps_series_and_counters_never_decrease(tfs, base):
    clock = Clock()
    tracker, runner = _runner(tfs, base, clock)
    tracker.poll()
    runner.run_once()
    assert _success(runner) == {"1": 1.0, "2": None} and _runs(runner, "ok") == 1
    woken = []
    tracker.add_listener(lambda: woken.append(clock.now))

    tfs.stop()  # the model server dies
    clock.now += 5
    [gen] = tracker.poll().models
    assert not gen.up and woken == [clock.now]  # the outage wakes the canary at once
    [r] = runner.run_once()  # the first run after the outage
    assert r.result == "error" and "refused" in (r.error or "")
    assert _success(runner) == {"1": 0.0, "2": None}
    assert _runs(runner, "ok") == 1 and _runs(runner, "error") == 1

    clock.now += RETENTION_S / 2  # still recent: still probed, still failing, still there
    tracker.poll()
    runner.run_once()
    assert _success(runner)["1"] == 0.0 and _runs(runner, "error") == 2

    tfs.start()  # back on the same port
    clock.now += 5
    tracker.poll()
    runner.run_once()
    assert _success(runner)["1"] == 1.0
    assert _runs(runner, "ok") == 2 and _runs(runner, "error") == 2


def test_long_outage_keeps_only_configured_versions(tfs, base):
    clock = Clock()
    entry = ModelEntry("gen", base, {"stable": 1}, (1,))
    tracker, runner = _runner(tfs, base, clock, entry)
    tracker.poll()
    runner.run_once()
    tfs.stop()
    clock.now += RETENTION_S + 1
    tracker.poll()
    [r] = runner.run_once()  # configured by a label: probed and kept however long it lasts
    assert r.result == "error" and _success(runner)["1"] == 0.0

    unlabelled, runner2 = _runner(tfs, base, clock)
    tfs.start()
    unlabelled.poll()
    runner2.run_once()
    tfs.stop()
    clock.now += RETENTION_S + 1
    unlabelled.poll()
    assert runner2.run_once() == [] and runner2.results() == []


def test_predict_failure_is_an_error_result(tfs, base):
    tfs.state.fail_status = 500
    tracker, runner = _runner(tfs, base)
    tracker.poll()
    [r] = runner.run_once()
    assert r.result == "error" and "http 500" in (r.error or "")


def test_missing_golden_file_is_an_error_result(tfs, tmp_path):
    tracker, runner = _runner(tfs, tmp_path)
    tracker.poll()
    [r] = runner.run_once()
    assert r.result == "error" and "no golden canary file" in (r.error or "")


def test_unknown_base_path_is_an_error_result(tfs):
    tracker, runner = _runner(tfs, None)
    tracker.poll()
    [r] = runner.run_once()
    assert r.result == "error" and "no base path" in (r.error or "")


def test_new_available_version_wakes_the_runner(tfs, base):
    tracker, runner = _runner(tfs, base)
    runner.interval_s = 3600  # only a state change can trigger the second run
    runner.start()
    try:
        tracker.poll()
        from tests.support.exporter import wait_for

        wait_for(lambda: runner.results(), what="canary run after a state change")
    finally:
        runner.stop()


@pytest.mark.parametrize(
    "doc",
    [
        "{broken",
        json.dumps({"prompts": []}),
        json.dumps({"max_new_tokens": 8, "prompts": []}),
        json.dumps({"max_new_tokens": 8, "prompts": [{"prompt": "x"}]}),
    ],
)
def test_malformed_golden_files(tmp_path, doc):
    path = tmp_path / "golden_canary.json"
    path.write_text(doc)
    with pytest.raises(GoldenError):
        load_golden(path)


def test_rows_carry_the_stop_inputs_only_for_exports_that_recorded_them():
    """An export from before the in-graph stop has no `stop`/`ignore_eos` inputs and refuses a
    row that carries them; a newer export records both in its golden request."""
    from exporter.tfserving.canary import Golden, GoldenPrompt
    from tokenpulse.tfserving.signature import STOP_INPUTS, stop_slots

    prompts = (GoldenPrompt("hi", "there", 1.0),)
    old = Golden(max_new_tokens=4, request={"temperature": 0.0, "seed": 0}, prompts=prompts)
    new = Golden(
        max_new_tokens=4,
        request={"temperature": 0.0, "seed": 0, "stop": stop_slots(), "ignore_eos": 0},
        prompts=prompts,
    )
    assert not set(STOP_INPUTS) & set(old.row("hi"))
    assert new.row("hi")["stop"] == stop_slots() and new.row("hi")["ignore_eos"] == 0
