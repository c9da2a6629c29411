"""The monitoring generator: every file the mixin drives; thresholds live in config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from monitoring import generate
from monitoring.mixin import config, rulefiles
from tokenpulse import ports


def test_generates_rules_alertmanager_prometheus_and_dashboards() -> None:
    files = generate.files()
    assert {
        Path("alerts/alerts.rules.yml"),
        Path("alerts/compressed/recording.rules.yml"),
        Path("monitoring/alertmanager/alertmanager.local.yml"),
        Path("monitoring/prometheus/prometheus.yml"),
        Path("dashboards/tokenpulse-slo.json"),
    } <= set(files)
    assert len([p for p in files if p.parent == Path("dashboards")]) == len(config.DASHBOARD_UIDS)
    local = files[Path("monitoring/alertmanager/alertmanager.local.yml")]
    assert f"http://127.0.0.1:{ports.ONCALL}/pager" in local


def test_a_threshold_changed_in_config_changes_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    before = rulefiles.render_files()["alerts.rules.yml"]
    monkeypatch.setattr(config, "GPU_MEMORY_FULL", 0.9)
    after = rulefiles.render_files()["alerts.rules.yml"]
    assert "> 0.95" in before and "> 0.9\n" in after.replace("'", "")


def test_compressed_rules_keep_expressions_and_shrink_windows() -> None:
    normal = yaml.safe_load(rulefiles.render_files()["alerts.rules.yml"])
    fast = yaml.safe_load(rulefiles.render_files(compressed=True)["alerts.rules.yml"])
    pairs = [
        (a, b)
        for g, h in zip(normal["groups"], fast["groups"], strict=True)
        for a, b in zip(g["rules"], h["rules"], strict=True)
    ]
    page = next(b for a, b in pairs if a["alert"].endswith("AvailabilityBudgetBurn"))
    assert page["for"] == "5s"  # 2m / 60, floored at COMPRESSED_MIN_SECONDS
    assert "[1m]" in page["expr"] and "ratio_rate1h" in page["expr"]  # names keep their windows
    assert all(a["alert"] == b["alert"] and a["labels"] == b["labels"] for a, b in pairs)
    assert config.COMPRESSION_FACTOR == 60
    # an age threshold is a duration too: the backlog alert's 600 s becomes 10 s
    old, new = next((a, b) for a, b in pairs if a["alert"].endswith("ShipperBacklogOld"))
    assert old["expr"].endswith("> 600") and new["expr"].endswith("> 10")
