"""The generated dashboards pass the house lint and follow the config; the SLO ones use the SLIs."""

from __future__ import annotations

import json
from pathlib import Path

from monitoring.mixin import config, slis
from monitoring.mixin.dashboards import BUILDERS, build_model, render_all
from monitoring.mixin.dashboards.build import files
from monitoring.mixin.dashboards.lint import lint
from monitoring.mixin.model import sli_name
from monitoring.mixin.promql import NORMAL
from monitoring.mixin.rules import sli_rules


def test_generated_dashboards_pass_the_lint():
    models = {name: json.loads(text) for name, text in render_all().items()}
    assert lint(models) == []


def test_files_go_to_the_dashboards_folder_by_uid():
    assert sorted(files()) == sorted(Path("dashboards") / n for n in render_all())


def test_five_dashboards_with_the_config_uids_and_grafana_11_schema():
    models = [build_model(key) for key in BUILDERS]
    assert [m["uid"] for m in models] == [config.DASHBOARD_UIDS[k] for k in BUILDERS]
    assert len(models) == 5
    assert {m["schemaVersion"] for m in models} == {41}
    for m in models:
        ids = [p["id"] for p in m["panels"]]
        assert ids == list(range(1, len(ids) + 1))


def test_signal_panels_link_the_runbooks_of_their_alerts():
    links = {
        p["title"]: [link["url"].rsplit("/", 1)[-1] for link in p.get("links", [])]
        for p in build_model("slo")["panels"]
    }
    assert links["SLI: latency"] == ["TokenPulseGatewayLatencyBudgetBurn.md"]
    assert len(links["Burn rate (1h)"]) == len(config.SLOS)
    linked = sum(1 for k in BUILDERS for p in build_model(k)["panels"] if p.get("links"))
    assert linked >= 25


def test_slo_panels_draw_the_slis_the_rules_record():
    panels = {p["title"]: p for p in build_model("slo")["panels"]}
    job = config.JOBS.selector("gateway")
    chosen = f'{job}, model=~"$model", version=~"$version"'
    recorded = {r["record"]: r["expr"] for r in sli_rules(NORMAL)}
    for slo in config.SLOS:
        (target,) = panels[f"SLI: {slo.name}"]["targets"]
        assert slis.error_ratio(slo, config.SLO_PERIOD, chosen, by="") in target["expr"]
        assert recorded[sli_name(slo.name, "1h")] == slis.error_ratio(slo, "1h", job)
    latency = panels["SLI: latency"]["targets"][0]["expr"]
    assert 'code=~"2.."' in latency  # answered requests only, as in the rule


def test_the_generator_is_deterministic():
    assert render_all() == render_all()
