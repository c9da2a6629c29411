"""`tokenpulse build monitoring`: committed files match the generator; thresholds live in config."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from monitoring import build
from monitoring.mixin import config, rules

ROOT = Path(__file__).resolve().parents[2]


def test_committed_files_match_the_generator() -> None:
    assert build.drifted() == [], "run `tokenpulse build monitoring` and commit the result"


def test_check_command_reports_drift(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "stack.cli", "build", "monitoring", "--check"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert build.write_all(tmp_path) and build.drifted(tmp_path) == []
    (tmp_path / "alerts" / "alerts.rules.yml").write_text("groups: []\n")
    assert build.drifted(tmp_path) == [Path("alerts/alerts.rules.yml")]
    assert build.write_all(tmp_path) == [Path("alerts/alerts.rules.yml")]


def test_a_threshold_changed_in_config_changes_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    before = rules.render_files()["alerts.rules.yml"]
    monkeypatch.setattr(config, "GPU_MEMORY_FULL", 0.9)
    after = rules.render_files()["alerts.rules.yml"]
    assert "> 0.95" in before and "> 0.9\n" in after.replace("'", "")


def test_compressed_rules_keep_expressions_and_shrink_windows() -> None:
    normal = yaml.safe_load(rules.render_files()["alerts.rules.yml"])
    fast = yaml.safe_load(rules.render_files(compressed=True)["alerts.rules.yml"])
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
