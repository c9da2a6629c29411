"""A page delivered through the real Prometheus and Alertmanager, every link in it followed.

The stack's own Prometheus, Alertmanager and on-call receiver (the component table's rows, as `up`
starts them) evaluate a copy of the generated TfServingDown rule made to fire at once, and the
always-firing Watchdog; the dashboards are pushed to the Grafana stand-in the stack links. Each
link of the page (runbook, dashboard panel with its time range, sample search, the rule in
Prometheus, the alert in Alertmanager) must answer 200.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from devtools.standins.grafana import GrafanaStandin
from monitoring.grafana.push import Credential, connect, push
from monitoring.mixin import rulefiles
from monitoring.mixin.config import MixinConfig
from monitoring.mixin.dashboards import build_models
from stack import components
from stack.config import RULES, Ports, StackConfig
from tokenpulse.paths import DASHBOARDS
from tokenpulse.procs import free_port

ALERT = "TokenPulseTfServingDown"
FIRES_NOW = (
    'label_replace(label_replace(vector(1), "model", "gen", "", ""), "version", "1", "", "")'
)


def _write_rule_file(path: Path, cfg: MixinConfig) -> None:
    """The generated rule as the stack renders it (its links), firing now; and a Watchdog."""
    text = rulefiles.render_files(cfg, build_models(cfg))[RULES["normal"][1].name]
    groups = yaml.safe_load(text)["groups"]
    rule = next(r for g in groups for r in g["rules"] if r.get("alert") == ALERT)
    # firing after a few seconds: an alert that fires before Prometheus has found Alertmanager
    # waits for the next resend (a minute)
    rule = {**rule, "expr": FIRES_NOW, "for": "6s"}
    watchdog = {
        "alert": "Watchdog", "expr": "vector(1)", "for": "6s", "labels": {"severity": "none"}
    }  # fmt: skip
    path.write_text(yaml.safe_dump({"groups": [{"name": "t", "rules": [rule, watchdog]}]}))


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _page(oncall: str, deadline_s: float = 90.0) -> dict[str, Any]:
    until = time.monotonic() + deadline_s
    while time.monotonic() < until:
        for entry in json.loads(_get(f"{oncall}/notifications")[1]):
            if entry["receiver"] == "pager":
                return entry
        time.sleep(0.5)
    raise AssertionError("no page reached the on-call receiver")


def test_every_link_of_a_delivered_page_answers(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    with GrafanaStandin() as grafana, contextlib.ExitStack() as stack:
        api = connect(grafana.url, Credential(token=grafana.state.token))
        push(api, grafana.url, sorted(DASHBOARDS.glob("*.json")), "tokenpulse", "TokenPulse")
        config = StackConfig(
            run_dir=run, ports=Ports(**{f: free_port() for f in Ports.names()}),
            custom_rules=(tmp_path / "fires.rules.yml",), scrape_interval="1s",
            evaluation_interval="1s",
            group_wait="1s", group_interval="1s", watchdog_interval="2s",
            grafana_url=grafana.url, start_timeout_s=60,
        )  # fmt: skip
        _write_rule_file(config.custom_rules[0], components.mixin_config(config))
        for name in ("oncall", "alertmanager", "prometheus"):
            stack.enter_context(components.by_name(name).start(config))
        oncall = config.url("oncall_port")
        entry = _page(oncall)
        (alert,) = entry["alerts"]
        assert alert["labels"]["alertname"] == ALERT
        (links,) = entry["links"]
        assert set(links) == {"runbook", "dashboard", "samples", "source", "alertmanager"}
        assert links["runbook"] == f"{oncall}/runbooks/{ALERT}"
        assert links["dashboard"].startswith(f"{grafana.url}/d/tokenpulse-serving/?viewPanel=")
        assert "&from=" in links["dashboard"] and "&to=" in links["dashboard"]
        assert links["source"].startswith(config.url("prometheus_port", "/graph?"))
        assert links["alertmanager"] == config.url("alertmanager_port")
        login = {"Authorization": f"Bearer {grafana.state.token}"}  # a signed-in browser
        for kind, url in links.items():
            status, body = _get(url, login if url.startswith(grafana.url) else None)
            assert status == 200, (kind, url, body[:200])
        assert f"<h1>{ALERT}</h1>" in _get(links["runbook"])[1].decode()
        assert b"tokenpulse samples search --model gen --version 1" in _get(links["samples"])[1]
        # the Watchdog went its own way: recorded, counted, not a page
        watchdog = json.loads(_get(f"{oncall}/watchdog")[1])
        assert watchdog["count"] >= 1 and watchdog["age_s"] < 30
        receivers = {e["receiver"] for e in json.loads(_get(f"{oncall}/notifications")[1])}
        assert receivers == {"pager", "watchdog"}
