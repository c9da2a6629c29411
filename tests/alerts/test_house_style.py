"""House style of every generated alert and its runbook, enforced."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from monitoring.mixin import links
from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.dashboards import build_models
from monitoring.oncall import deadman
from tests.support.runbooks import DEPLOYMENTS, blocks, fill, label_of, program, simple_commands
from tokenpulse.paths import ROOT

MODELS = build_models(config)

RULES = yaml.safe_load((ROOT / "alerts" / "alerts.rules.yml").read_text())
# an alert group also holds the recording rules its alerts read, just before them (holds.py)
ALERTS = [r for g in RULES["groups"] for r in g["rules"] if "alert" in r]
RUNBOOKS = ROOT / "alerts" / "runbooks"
# raised outside Prometheus, with a runbook all the same: the on-call receiver's own page
OWN_ALERTS = {deadman.ALERTNAME}
NAME = re.compile(
    r"^TokenPulse(Gateway|Quality|Canary|TfServing|Exporter|Gpu|Shipper|Pipeline|Training|Prometheus"
    r"|Alertmanager)([A-Z][a-z0-9]+)+$"
)
SECTIONS = ["## Meaning", "## Impact", "## Diagnosis", "## Mitigation"]
# the on-call shape: after Mitigation, how to silence, whom to escalate to, how to see it is over
ON_CALL = ["## Silence", "## Escalate", "## Check it recovered"]


@pytest.mark.parametrize(
    "rule", ALERTS, ids=lambda r: f"{r['alert']}-{r['labels'].get('long_window', '')}"
)
def test_alert_follows_house_style(rule: dict) -> None:
    if rule["alert"] == config.watchdog_name:  # the name dead man's switches expect
        assert rule["labels"] == {"severity": "none"}, "the Watchdog notifies nobody by severity"
    else:
        assert NAME.match(rule["alert"]), "CamelCase with a component prefix"
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
    assert rule.get("for"), "every alert has a for"
    notes = rule["annotations"]
    assert set(notes) == {"summary", "description", "runbook_url", "dashboard_url"}
    assert notes["summary"] and "{{" not in notes["summary"], "summary is static"
    assert "{{ $labels." in notes["description"] or "{{ $value" in notes["description"]
    assert notes["runbook_url"] == config.links.runbook_url(rule["alert"])
    # the panel that shows the alert's signal (a notification adds the time range)
    assert notes["dashboard_url"] == links.dashboard_url(config, MODELS, rule["alert"])


@pytest.mark.parametrize("name", sorted({r["alert"] for r in ALERTS} | OWN_ALERTS))
def test_runbook_has_four_sections_with_their_content(name: str) -> None:
    path = RUNBOOKS / f"{name}.md"
    assert path.is_file(), f"missing runbook {path.name}"
    text = path.read_text()
    assert text.startswith(f"# {name}\n")
    positions = [text.find(s + "\n") for s in SECTIONS]
    assert -1 not in positions and positions == sorted(positions), (
        "Meaning/Impact/Diagnosis/Mitigation"
    )
    diagnosis = text[positions[2] : positions[3]]
    mitigation = text[positions[3] :]
    assert "```promql\n" in diagnosis, "diagnosis gives the PromQL"
    uids = re.findall(r"uid `([a-z0-9-]+)`", diagnosis)
    assert uids and set(uids) <= set(config.dashboard_uids.values()), "a dashboard panel"
    assert "Saved sample search:" in diagnosis and "tokenpulse samples search" in diagnosis
    # the commands per deployment (the order and labels: test_shell_blocks_come_per_deployment)
    for part, text in (("diagnosis", diagnosis), ("mitigation", mitigation)):
        for deployment in DEPLOYMENTS:
            assert f"```sh {deployment}\n" in text, f"{part} gives the {deployment} commands"


@pytest.mark.parametrize(
    "path", [p for p in sorted(RUNBOOKS.glob("*.md")) if "\n## Silence\n" in p.read_text()],
    ids=lambda p: p.stem,
)  # fmt: skip
def test_on_call_sections_follow_mitigation_in_order(path: Path) -> None:
    text = path.read_text()
    positions = [text.find(s + "\n") for s in ["## Mitigation", *ON_CALL]]
    assert -1 not in positions and positions == sorted(positions), "Silence/Escalate/Recovered"
    silence = text[positions[1] : positions[2]]
    assert re.search(r"amtool .*silence add", silence) or "Never silence" in silence


def test_meta_alerts_are_labelled_for_their_own_route() -> None:
    meta = [r for r in ALERTS if re.match(r"^TokenPulse(Prometheus|Alertmanager)", r["alert"])]
    assert len(meta) >= 8
    for rule in meta:
        assert {k: rule["labels"][k] for k in config.meta_labels} == config.meta_labels
    assert [r for r in ALERTS if r["alert"] == config.watchdog_name], "a Watchdog"


def _panel_titles(panels: list[dict]) -> set[str]:
    out = set()
    for panel in panels:
        out.add(panel.get("title", ""))
        out |= _panel_titles(panel.get("panels", []))
    return out


@pytest.mark.parametrize("name", sorted({r["alert"] for r in ALERTS}))
def test_runbook_dashboard_panels_exist(name: str) -> None:
    text = (RUNBOOKS / f"{name}.md").read_text()
    m = re.search(r"uid `([a-z0-9-]+)`\), panels (.*)\.\n", text)
    assert m is not None, 'Dashboard: ... (uid `X`), panels "A", "B".'
    board = json.loads((ROOT / "dashboards" / f"{m[1]}.json").read_text())
    missing = set(re.findall(r'"([^"]+)"', m[2])) - _panel_titles(board["panels"])
    assert missing == set(), f"panels not on dashboard {m[1]}"


@pytest.mark.parametrize("path", sorted(RUNBOOKS.glob("*.md")), ids=lambda p: p.stem)
def test_shell_blocks_come_per_deployment(path: Path) -> None:
    """Local, compose, Kubernetes, in this order, each after its label line (tests/support/
    runbooks.py), so a reader on call finds theirs and the runbook tests can check each."""
    found = blocks(path)
    bad = [f"```{b.info} in {b.section}: sh local|compose|kubernetes" for b in found
           if b.deployment not in DEPLOYMENTS]  # fmt: skip
    bad += [f"```{b.info} in {b.section} follows {b.label!r}, not its label" for b in found
            if label_of(b) != b.deployment]  # fmt: skip
    order = [b.deployment for b in found]
    groups = [order[i : i + 3] for i in range(0, len(order), 3)]
    if any(g != list(DEPLOYMENTS) for g in groups):
        bad.append(f"blocks {order}: local, compose, kubernetes, in this order, each time")
    for i in range(0, len(found) - 2, 3):
        if len({b.section for b in found[i : i + 3]}) != 1:
            bad.append(f"a group spans sections: {[b.section for b in found[i : i + 3]]}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("path", sorted(RUNBOOKS.glob("*.md")), ids=lambda p: p.stem)
def test_no_line_uses_another_deployments_tools(path: Path) -> None:
    tools = {"local": {"docker", "docker-compose", "kubectl"}, "compose": {"kubectl"},
             "kubernetes": {"docker", "docker-compose"}}  # fmt: skip
    bad = []
    for block in blocks(path):
        for line in block.lines:
            for words in simple_commands(fill(line)):
                if program(words) in tools.get(block.deployment, set()):
                    bad.append(f"{block.deployment}: {line}")
    assert not bad, "\n".join(bad)


def runbook_promql() -> list[tuple[str, str]]:
    """(alert, expression) for every PromQL line of every runbook's Diagnosis."""
    out = []
    for path in sorted(RUNBOOKS.glob("*.md")):
        for block in re.findall(r"```promql\n(.*?)```", path.read_text(), re.S):
            out += [(path.stem, line) for line in block.splitlines() if line.strip()]
    return out


def test_no_runbook_without_an_alert() -> None:
    names = {r["alert"] for r in ALERTS} | OWN_ALERTS
    assert {p.stem for p in RUNBOOKS.glob("*.md")} == names


def test_recording_rules_are_named_level_metric_operations() -> None:
    doc = yaml.safe_load((ROOT / "alerts" / "recording.rules.yml").read_text())
    names = [r["record"] for g in [*doc["groups"], *RULES["groups"]] for r in g["rules"]
             if "record" in r]  # fmt: skip
    assert any(n.endswith(":time") for n in names)  # the alert groups' own marks are read too
    bad = [n for n in names if not re.fullmatch(r"[a-z_]+:[a-z0-9_]+:[a-z0-9_]+", n)]
    assert bad == []
