"""restart-no-available-version's config without a stack: what the restarted model server is left
serving, and the original put back. The drill itself runs in tests/stack/test_drill.py."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from stack.config import StackConfig
from stack.drill.outages import (
    CrashLoopSlow,
    FailureAfterRestart,
    RestartNoAvailableVersion,
    _replace,
    wait_steady,
)
from stack.drill.scenario import Log
from stack.drill.target import Target
from stack.up.state import StackState, write_state
from tokenpulse.tfserving.config import load_model_server_config
from tokenpulse.tfserving.render import render_models_config


def _target(run_dir: Path, models: Path) -> Target:
    (run_dir / "demo-key.txt").write_text("k\n")
    config = StackConfig(run_dir=run_dir, rules="compressed", restart_delay_s=20)
    write_state(StackState(config, os.getpid(), {}))
    return Target(run_dir)


def test_the_config_serves_only_a_version_with_no_directory_and_is_put_back(
    tmp_path: Path,
) -> None:
    base = tmp_path / "models" / "gen"
    for version in (1, 2, 90):
        (base / str(version)).mkdir(parents=True)
    path = tmp_path / "models.config"
    text = render_models_config("gen", base, (1, 2), {"stable": 1, "canary": 2}, "# header\n")
    path.write_text(text)
    path.chmod(0o640)
    target = _target(tmp_path, tmp_path / "models")

    missing = RestartNoAvailableVersion()._serve_missing_version(target, path)

    assert not (base / str(missing)).exists()
    (model,) = load_model_server_config(path).models
    assert model.version_policy is not None
    assert (model.version_policy.choice, model.version_policy.versions) == ("specific", (missing,))
    assert dict(model.version_labels) == {"stable": missing, "canary": missing}
    _replace(path, text)
    assert path.read_text() == text and path.stat().st_mode & 0o777 == 0o640


def _oncall(run_dir: Path, *notes: tuple[float, str, str, str]) -> None:
    """oncall.jsonl as the receiver writes it: (unix time, receiver, status, alertname)."""
    lines = []
    for at, receiver, status, name in notes:
        labels = {"alertname": name, "severity": "critical", "long_window": "6h", "model": "gen"}
        stamp = datetime.fromtimestamp(at, UTC).isoformat()
        alert = {"status": status, "labels": labels}
        lines.append(json.dumps({"received_at": stamp, "receiver": receiver, "alerts": [alert]}))
    (run_dir / "oncall.jsonl").write_text("\n".join(lines) + "\n")


def test_a_burn_page_after_the_config_change_is_a_second_page_one_before_it_is_the_kill(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr("stack.drill.outages.settle_after_load", lambda target, log: None)
    target = _target(tmp_path, tmp_path / "models")
    monkeypatch.setattr(target, "query_range", lambda *a: [{"metric": {}, "values": []}])
    scenario = RestartNoAvailableVersion()
    burn, nav = scenario.burn, scenario.expect[0].alertname
    assert burn in scenario.allow  # the kill's own failures may page it before TfServingDown

    log = Log()
    log.timings["config_written"] = 30.0
    written = log.started + 30.0
    _oncall(
        tmp_path, (written - 20, "pager", "firing", burn), (written + 12, "pager", "firing", nav)
    )
    scenario.check(target, log)
    assert log.problems == []

    log = Log()
    log.timings["config_written"] = 30.0
    written = log.started + 30.0
    _oncall(
        tmp_path, (written + 12, "pager", "firing", nav), (written + 40, "pager", "firing", burn)
    )
    scenario.check(target, log)
    assert log.problems == [f"{burn} (6h) paged after the config change: the no-version outage "
                            "paged twice"]  # fmt: skip


def test_crash_loop_slow_wants_one_page_that_lasts_the_loop(tmp_path: Path) -> None:
    target = _target(tmp_path, tmp_path / "models")
    scenario = CrashLoopSlow()
    name = scenario.expect[0].alertname
    assert "TokenPulseTfServingDown" not in scenario.allow  # the loop's page stands for it
    assert "TokenPulseGatewayAvailabilityBudgetBurn" not in scenario.allow  # ... and for the burn

    log = Log()
    log.timings.update(second_outage=13.0, loop_end=60.0)
    _oncall(tmp_path, (log.started + 20, "pager", "firing", name),
            (log.started + 75, "pager", "resolved", name))  # fmt: skip
    scenario.check(target, log)
    assert log.problems == [] and log.timings["paged_after_second_outage"] == 7.0

    log = Log()
    log.timings.update(second_outage=13.0, loop_end=60.0)
    _oncall(tmp_path, (log.started + 20, "pager", "firing", name),
            (log.started + 30, "pager", "resolved", name),
            (log.started + 40, "pager", "firing", name))  # fmt: skip
    scenario.check(target, log)
    assert log.problems == [
        f"{name} paged 2 times during the loop, not once",
        f"{name} resolved during the loop: it did not fire steadily",
    ]


def test_failure_after_restart_must_page_through_the_hold(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("stack.drill.outages.settle_after_load", lambda target, log: None)
    target = _target(tmp_path, tmp_path / "models")
    scenario = FailureAfterRestart()
    log = Log()
    log.timings["failing"] = 50.0
    _oncall(tmp_path, (log.started + 65, "pager", "firing", scenario.burn))

    held: list[dict] = [{"metric": {}, "values": [[0, "1"]]}]
    monkeypatch.setattr(target, "query_range", lambda *a: held)
    scenario.check(target, log)
    assert log.problems == [] and log.timings["burn_paged"] == 65.0

    log = Log()
    log.timings["failing"] = 50.0
    monkeypatch.setattr(target, "query_range", lambda *a: [])
    scenario.check(target, log)
    assert log.problems == [
        f"{scenario.hold} was not firing when the failures began: the drill did not show the "
        "burn paging through a hold"
    ]


def test_a_kill_waits_until_up_is_steady_for_the_crash_loop_window(
    tmp_path: Path, monkeypatch
) -> None:
    target = _target(tmp_path, tmp_path / "models")
    asked: list[str] = []
    answers = iter([[{"metric": {}}], []])
    monkeypatch.setattr(target, "query", lambda expr: asked.append(expr) or next(answers))
    log = Log()
    wait_steady(target, log)
    # compressed: the 30m window is 30 s
    assert asked == ['changes(up{job="tfserving"}[30s]) > 0'] * 2
    assert "steady" in log.timings and log.remarks == []
