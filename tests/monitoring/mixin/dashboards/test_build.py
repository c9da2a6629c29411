"""The committed dashboards equal the generator's output and pass the house lint."""

from __future__ import annotations

import json
import shutil

from monitoring.mixin import config
from monitoring.mixin.dashboards import BUILDERS, build_model, render_all
from monitoring.mixin.dashboards.build import DEFAULT_OUT, drift, write
from monitoring.mixin.dashboards.cli import main as cli_main
from monitoring.mixin.dashboards.lint import exported_metrics, lint
from stack.cli import build_parser


def test_committed_dashboards_have_not_drifted():
    assert drift(DEFAULT_OUT, render_all()) == [], "run `tokenpulse dashboards build` and commit"


def test_generated_dashboards_pass_the_lint():
    models = {name: json.loads(text) for name, text in render_all().items()}
    assert lint(models, exported_metrics()) == []


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


def test_the_generator_is_deterministic():
    assert render_all() == render_all()


def test_check_reports_a_stale_and_a_stray_file(tmp_path):
    rendered = render_all()
    write(tmp_path, rendered)
    assert drift(tmp_path, rendered) == []
    stale = sorted(rendered)[0]
    (tmp_path / stale).write_text("{}\n")
    (tmp_path / "old.json").write_text("{}\n")
    assert drift(tmp_path, rendered) == sorted([stale, "old.json"])
    write(tmp_path, rendered)
    assert drift(tmp_path, rendered) == []


def test_cli_check_exits_1_on_drift_and_0_when_rebuilt(tmp_path, capsys):
    shutil.copytree(DEFAULT_OUT, tmp_path / "d")
    out = tmp_path / "d"
    (out / sorted(render_all())[0]).write_text("{}\n")
    args = build_parser().parse_args(["dashboards", "build", "--check", "--out", str(out)])
    assert cli_main(args) == 1
    assert "drifted" in capsys.readouterr().err
    assert cli_main(build_parser().parse_args(["dashboards", "build", "--out", str(out)])) == 0
    assert cli_main(args) == 0
