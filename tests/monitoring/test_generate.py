"""The monitoring generator: every file the mixin drives; thresholds live in config."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from monitoring import generate
from monitoring.mixin import rulefiles
from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.config import Links, MixinConfig
from monitoring.mixin.dashboards import build_models
from tokenpulse import ports

MODELS = build_models(config)


def test_generates_rules_alertmanager_prometheus_and_dashboards() -> None:
    files = generate.files(config)
    assert {
        Path("alerts/alerts.rules.yml"),
        Path("alerts/compressed/recording.rules.yml"),
        Path("monitoring/alertmanager/alertmanager.local.yml"),
        Path("monitoring/prometheus/prometheus.yml"),
        Path("dashboards/tokenpulse-slo.json"),
    } <= set(files)
    assert len([p for p in files if p.parent == Path("dashboards")]) == len(config.dashboard_uids)
    local = files[Path("monitoring/alertmanager/alertmanager.local.yml")]
    assert f"http://127.0.0.1:{ports.ONCALL}/pager" in local


def test_a_threshold_changed_in_config_changes_the_rules() -> None:
    before = rulefiles.render_files(config, MODELS)["alerts.rules.yml"]
    changed = dataclasses.replace(config, gpu_memory_full=0.9)
    after = rulefiles.render_files(changed, MODELS)["alerts.rules.yml"]
    assert "> 0.95" in before and "> 0.9\n" in after.replace("'", "")
    # a value, not a module: the shipped config is untouched
    assert rulefiles.render_files(config, MODELS)["alerts.rules.yml"] == before


def test_a_deployment_renders_its_own_links_and_nothing_else() -> None:
    links = Links("https://ops.test/runbooks/{alertname}", "https://grafana.test", "https://k.test")
    mine = MixinConfig.local().with_links(links)
    assert mine.links == links and dataclasses.replace(mine, links=config.links) == config
    ours, theirs = generate.files(config), generate.files(mine)
    assert ours.keys() == theirs.keys()
    moved = {p for p in ours if ours[p] != theirs[p]}
    # the dashboards and every file with a runbook or notification link; not the scrape configs
    assert (
        Path("alerts/alerts.rules.yml") in moved and Path("dashboards/tokenpulse-slo.json") in moved
    )
    assert Path("alerts/recording.rules.yml") not in moved
    assert not any(p.parent == Path("monitoring/prometheus") for p in moved)
    rules = yaml.safe_load(theirs[Path("alerts/alerts.rules.yml")])["groups"]
    for rule in (r for g in rules for r in g["rules"] if "alert" in r):
        notes = rule["annotations"]
        assert notes["runbook_url"] == f"https://ops.test/runbooks/{rule['alert']}"
        assert notes["dashboard_url"].startswith("https://grafana.test/d/tokenpulse-")
    assert "https://k.test/app/discover" in theirs[Path("monitoring/alertmanager/alertmanager.yml")]


def test_compressed_rules_keep_expressions_and_shrink_windows() -> None:
    normal = yaml.safe_load(rulefiles.render_files(config, MODELS)["alerts.rules.yml"])
    fast = yaml.safe_load(
        rulefiles.render_files(config, MODELS, compressed=True)["alerts.rules.yml"]
    )
    pairs = [
        (a, b)
        for g, h in zip(normal["groups"], fast["groups"], strict=True)
        for a, b in zip(g["rules"], h["rules"], strict=True)
        if "alert" in a  # the recording rules an alert group holds (holds.py) pair up too
    ]
    groups = zip(normal["groups"], fast["groups"], strict=True)
    records = [(a["record"], b["record"]) for g, h in groups
               for a, b in zip(g["rules"], h["rules"], strict=True) if "record" in a]  # fmt: skip
    assert records and all(a == b for a, b in records)
    page = next(b for a, b in pairs if a["alert"].endswith("AvailabilityBudgetBurn"))
    assert page["for"] == "5s"  # 2m / 60, floored at COMPRESSED_MIN_SECONDS
    assert "[1m]" in page["expr"] and "ratio_rate1h" in page["expr"]  # names keep their windows
    assert all(a["alert"] == b["alert"] and a["labels"] == b["labels"] for a, b in pairs)
    assert config.compression_factor == 60
    # an age threshold is a duration too: the backlog alert's 600 s becomes 10 s
    old, new = next((a, b) for a, b in pairs if a["alert"].endswith("ShipperBacklogOld"))
    assert old["expr"].endswith("> 600") and new["expr"].endswith("> 10")
