"""The canary runner: golden prompts per AVAILABLE version, match, similarity, NLL, errors."""

from __future__ import annotations

import json

import pytest

from exporter.canary import CanaryRunner, GoldenError, load_golden
from exporter.modelconfig import ModelEntry
from exporter.status import StaticTargets, StatusTracker
from exporter.tfserving_client import TfServingClient
from tests.support.exporter import write_golden
from tokenpulse.testing.tfserving_standin import TfServingStandin

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


def _runner(tfs, base) -> tuple[StatusTracker, CanaryRunner]:
    client = TfServingClient(tfs.url)
    tracker = StatusTracker(
        client, StaticTargets([ModelEntry("gen", base, {})]), clock=lambda: 42.0
    )
    return tracker, CanaryRunner(client, tracker, 60, 5, clock=lambda: 42.0)


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


def test_only_available_versions_are_probed_and_old_results_dropped(tfs, base):
    write_golden(base, 2, PROMPTS)
    tfs.state.answers[("gen", 2)] = tfs.state.answers[("gen", 1)]
    tfs.state.versions["gen"] = {1: "AVAILABLE", 2: "LOADING"}
    tracker, runner = _runner(tfs, base)
    tracker.poll()
    assert [r.version for r in runner.run_once()] == [1]
    tfs.state.versions["gen"] = {1: "UNLOADING", 2: "AVAILABLE"}
    tracker.poll()
    runner.run_once()
    assert [r.version for r in runner.results()] == [2]
    assert set(runner.runs()) == {("gen", 2, "ok")}


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
