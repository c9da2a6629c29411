"""The generated rules load cleanly in Prometheus 2.42's promtool and every rule is unit-tested."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from monitoring.mixin.config import DEFAULT as config
from tests.support.promtool import run_test_file
from tokenpulse.paths import ROOT

ALERTS = ROOT / "alerts"
RULE_FILES = [ALERTS / "recording.rules.yml", ALERTS / "alerts.rules.yml"]
COMPRESSED = [ALERTS / "compressed" / p.name for p in RULE_FILES]
TEST_FILES = sorted((ALERTS / "tests").glob("*.test.yml"))

pytestmark = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")


def _rules(path: Path) -> list[dict]:
    return [r for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]]


def _tests() -> list[dict]:
    return [t for path in TEST_FILES for t in yaml.safe_load(path.read_text())["tests"]]


@pytest.mark.parametrize("files", [RULE_FILES, COMPRESSED], ids=["rules", "compressed"])
def test_check_rules_is_clean_with_every_lint(files: list[Path]) -> None:
    out = subprocess.run(
        ["promtool", "check", "rules", "--lint=all", "--lint-fatal", *map(str, files)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "WARNING" not in out.stdout + out.stderr


# The scenario files (the taxonomy in alerts/README.md) run in tests/alerts/test_scenarios.py, a
# module of their own, so that the two halves can run on two xdist workers side by side.
UNIT_FILES = [p for p in TEST_FILES if not p.name.startswith("scenarios_")]


def promtool_test(path: Path, workdir: Path) -> None:
    """One promtool unit-test file passes (one process per file: a failure names its file, and
    the slowest file sets the wall time, not the sum under one short timeout), on the rules its
    assertions read (tests/support/promtool.py)."""
    out = run_test_file(path, workdir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("SUCCESS") == 1, out.stdout


@pytest.mark.parametrize("path", UNIT_FILES, ids=lambda p: p.name.split(".")[0])
def test_promtool_unit_tests_pass(path: Path, tmp_path: Path) -> None:
    promtool_test(path, tmp_path)


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for test in _tests():
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = {r["alert"] for r in _rules(ALERTS / "alerts.rules.yml") if "alert" in r}
    assert names - firing == set(), "alerts never tested firing"
    # the Watchdog fires always: that is its test
    assert names - quiet == {config.watchdog_name}, "alerts never tested staying quiet"


def test_every_recording_rule_is_tested() -> None:
    exprs = [case["expr"] for t in _tests() for case in t.get("promql_expr_test", [])]
    patterns = [re.compile(m) for e in exprs for m in re.findall(r'__name__=~"([^"]+)"', e)]
    untested = {
        r["record"]
        for r in _rules(ALERTS / "recording.rules.yml")
        if not any(r["record"] in e for e in exprs)
        and not any(p.fullmatch(r["record"]) for p in patterns)
    }
    assert untested == set()


def test_tests_cover_both_rule_files_and_evaluate_recordings_first() -> None:
    groups = [g["name"] for p in RULE_FILES for g in yaml.safe_load(p.read_text())["groups"]]
    for path in TEST_FILES:
        doc = yaml.safe_load(path.read_text())
        # compressed_*: the rules the drill and test stacks run (alerts/compressed/)
        folder = "../compressed/" if path.name.startswith("compressed_") else "../"
        files = [f"{folder}recording.rules.yml", f"{folder}alerts.rules.yml"]
        assert doc["rule_files"] == files, path.name
        assert doc["group_eval_order"] == groups, path.name
        assert all("interval" in t for t in doc["tests"]), f"{path.name}: 2.42 needs interval"
