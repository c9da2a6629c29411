"""The generated dashboards pass the house lint and follow the config (the SLO panels: see
test_overview.py)."""

from __future__ import annotations

import json
from pathlib import Path

from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.dashboards import BUILDERS, build_model, render_all
from monitoring.mixin.dashboards.build import files
from monitoring.mixin.dashboards.lint import lint


def test_generated_dashboards_pass_the_lint():
    models = {name: json.loads(text) for name, text in render_all(config).items()}
    assert lint(models, config.links.runbook_url_pattern) == []


def test_files_go_to_the_dashboards_folder_by_uid():
    assert sorted(files(config)) == sorted(Path("dashboards") / n for n in render_all(config))


def test_six_dashboards_with_the_config_uids_and_grafana_11_schema():
    models = [build_model(config, key) for key in BUILDERS]
    assert [m["uid"] for m in models] == [config.dashboard_uids[k] for k in BUILDERS]
    assert len(models) == 6
    assert {m["schemaVersion"] for m in models} == {41}
    for m in models:
        ids = [p["id"] for p in m["panels"]]
        assert ids == list(range(1, len(ids) + 1))


def test_signal_panels_link_the_runbooks_of_their_alerts():
    links = {
        p["title"]: [
            link["url"] for link in p.get("links", []) if "runbook" in link["title"].lower()
        ]
        for p in build_model(config, "slo")["panels"]
    }
    runbook = config.links.runbook_url("TokenPulseGatewayLatencyBudgetBurn")
    assert links["SLI: latency"] == [runbook]
    assert links["Burn rate: latency"] == [runbook]
    linked = sum(1 for k in BUILDERS for p in build_model(config, k)["panels"] if p.get("links"))
    assert linked >= 25


def test_the_generator_is_deterministic():
    assert render_all(config) == render_all(config)
