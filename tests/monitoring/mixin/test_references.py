"""The static metric check: every query of a rule, dashboard or runbook names a declared metric."""

from __future__ import annotations

import json
from pathlib import Path

from monitoring import generate
from monitoring.mixin import references
from monitoring.mixin.config import DEFAULT as config

RULES = Path("alerts/alerts.rules.yml")
RECORDING = Path("alerts/recording.rules.yml")
DASHBOARD = Path("dashboards/tokenpulse-slo.json")
RUNBOOK = Path("alerts/runbooks/TokenPulseX.md")


def _known(files: dict[Path, str]) -> set[str]:
    """Every metric the files select, minus the recorded ones: a catalogue that fits exactly."""
    selected = {
        metric
        for path, text in files.items()
        for _, expr in references.queries(path, text)
        for metric in references.metric_names(expr)
    }
    return selected - references.recorded(files)


def test_recorded_series_count_as_declared() -> None:
    files = generate.files(config)
    recorded = references.recorded(files)
    assert "model:gateway_errors:ratio_rate1h" in recorded
    assert "model:gateway_mean_nll_nats:mean30m_stddev_over_time7d_offset1d" in recorded
    known = _known(files)
    assert not known & recorded  # the alerts use them, and nothing but the rules declares them
    assert references.undeclared(files, known) == []


def test_offsets_and_ranges_are_not_metrics() -> None:
    expr = "avg_over_time(model:x:mean30m[7d] offset 1d) > 2 * up{job='a'}[5m]"
    assert references.metric_names(expr) == {"model:x:mean30m", "up"}


def test_a_misspelled_metric_in_a_rule_is_named_with_its_file_and_rule() -> None:
    files = generate.files(config)
    known = _known(files)
    files[RULES] = files[RULES].replace("tokenpulse_gpu_lost{", "tokenpulse_gpu_lsot{")
    assert references.undeclared(files, known) == [
        f"{RULES}: rule TokenPulseGpuLost: tokenpulse_gpu_lsot is declared by no component"
    ]


def test_a_misspelled_metric_in_a_dashboard_is_named_with_its_file_and_panel() -> None:
    files = generate.files(config)
    known = _known(files)
    model = json.loads(files[DASHBOARD])
    panel = next(p for p in model["panels"] if p.get("title") == "Circuit breaker")
    panel["targets"][0]["expr"] = "max(tokenpulse_gateway_circuit_breaker_sate)"
    files[DASHBOARD] = json.dumps(model)
    assert references.undeclared(files, known) == [
        f"{DASHBOARD}: panel 'Circuit breaker' query A: "
        "tokenpulse_gateway_circuit_breaker_sate is declared by no component"
    ]


def test_runbook_promql_blocks_are_checked_and_shell_blocks_are_not() -> None:
    text = (
        "# X\n\n```promql\n# a comment\nrate(tokenpulse_typo_total[5m])\nup\n```\n\n"
        "```sh\ncurl -s http://x/metrics | grep not_a_metric\n```\n"
    )
    assert references.runbook_queries(text) == ["rate(tokenpulse_typo_total[5m])", "up"]
    assert references.undeclared({RUNBOOK: text}, {"up"}) == [
        f"{RUNBOOK}: PromQL block: tokenpulse_typo_total is declared by no component"
    ]
    assert references.undeclared({RECORDING: "groups: []\n"}, set()) == []
