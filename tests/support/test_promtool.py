"""The narrowed promtool run keeps every rule an assertion can read, and only those."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support import promtool
from tests.support.promtool import Rule, narrowed, reached, reads, run_test_file

RULES = [
    Rule("job:requests:rate1m", False, "sum(rate(requests_total[1m]))", {}),
    Rule("job:errors:ratio", False, "sum(rate(errors_total[1m])) / job:requests:rate1m", {}),
    Rule("ErrorsHigh", True, "job:errors:ratio > 0.5", {"severity": "critical"}),
    Rule("Held", True, 'ALERTS_FOR_STATE{alertname="ErrorsHigh"} > 0', {"severity": "warning"}),
    Rule("Templated", True, "up == 0", {"severity": "{{ $labels.tier }}"}),
    Rule("Unrelated", True, "disk_free_bytes < 1", {"severity": "info"}),
]


def test_a_recording_is_read_by_its_name_and_an_alert_by_its_selector() -> None:
    assert reads("job:errors:ratio > 0.5", RULES) == {"job:errors:ratio"}
    assert reads('ALERTS{alertname="ErrorsHigh", alertstate="firing"}', RULES) == {"ErrorsHigh"}


def test_a_label_an_alert_sets_from_its_query_keeps_the_alert() -> None:
    # severity is constant for three alerts and templated for one: that one may be critical
    assert reads('ALERTS{alertstate="firing", severity="critical"}', RULES) == {
        "ErrorsHigh",
        "Templated",
    }
    assert reads('ALERTS{alertname=~"Err.*|Held"}', RULES) == {"ErrorsHigh", "Held"}


def test_a_name_regex_or_a_bare_alerts_selector_keeps_everything_it_can_mean() -> None:
    alerts = {r.name for r in RULES if r.alert}
    assert reads("count(ALERTS)", RULES) == alerts
    assert reads('count({__name__=~"ALERTS.*"})', RULES) == alerts
    assert reads('{__name__=~"job:.*"}', RULES) == {"job:requests:rate1m", "job:errors:ratio"}


def test_what_an_alert_reaches_follows_recordings_and_other_alerts() -> None:
    assert reached({"Held"}, RULES) == {
        "Held",
        "ErrorsHigh",
        "job:errors:ratio",
        "job:requests:rate1m",
    }
    assert reached({"Unrelated"}, RULES) == {"Unrelated"}


RULE_FILE = """
groups:
  - name: records
    rules:
      - record: job:errors:ratio
        expr: sum(errors) / sum(requests)
      - record: job:unused:sum
        expr: sum(requests)
  - name: alerts
    rules:
      - alert: ErrorsHigh
        expr: job:errors:ratio > 0.5
        labels: {severity: critical}
      - alert: Held
        expr: ALERTS{alertname="ErrorsHigh", alertstate="firing"}
        labels: {severity: warning}
      - alert: Unrelated
        expr: vector(1)
        labels: {severity: info}
"""
# Held fires on ErrorsHigh's ALERTS series, which needs ErrorsHigh and the recording it reads
TEST_FILE = """
rule_files: [../rules/tokens.rules.yml]
evaluation_interval: 1m
group_eval_order: [records, alerts]
tests:
  - interval: 1m
    input_series:
      - {series: errors, values: 0 0 9x5}
      - {series: requests, values: 10x7}
    alert_rule_test:
      - eval_time: 5m
        alertname: Held
        exp_alerts:
          - exp_labels: {severity: warning, alertname: ErrorsHigh, alertstate: firing}
"""


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "tokens.rules.yml").write_text(RULE_FILE)
    (tmp_path / "tests").mkdir()
    test_file = tmp_path / "tests" / "held.test.yml"
    test_file.write_text(TEST_FILE)
    return test_file


def test_the_copy_keeps_the_rules_in_their_groups_and_order_and_drops_the_rest(
    files: Path, tmp_path: Path
) -> None:
    out = yaml.safe_load(narrowed(files, tmp_path / "narrow").read_text())
    rules = yaml.safe_load((tmp_path / "narrow" / out["rule_files"][0]).read_text())
    kept = [[r.get("alert") or r["record"] for r in g["rules"]] for g in rules["groups"]]
    assert kept == [["job:errors:ratio"], ["ErrorsHigh", "Held"]]
    assert out["group_eval_order"] == ["records", "alerts"]
    assert out["tests"] == yaml.safe_load(TEST_FILE)["tests"]


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_the_narrowed_run_passes_where_the_whole_one_does_and_needs_what_it_kept(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = subprocess.run(
        ["promtool", "test", "rules", files.name], cwd=files.parent, capture_output=True, text=True
    )
    assert whole.returncode == 0, whole.stdout + whole.stderr
    out = run_test_file(files, tmp_path / "narrow")
    assert out.returncode == 0, out.stdout + out.stderr
    # negative control: keeping only the alert the test names loses the alert it reads
    monkeypatch.setattr(promtool, "reached", lambda seeds, rules: set(seeds))
    out = run_test_file(files, tmp_path / "seeds-only")
    assert out.returncode != 0 and "Held" in out.stdout + out.stderr
