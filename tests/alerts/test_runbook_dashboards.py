"""Runbooks and dashboards agree: every panel a runbook names exists, the page's panel comes first.

A runbook names Grafana panels in two checkable forms (alerts/README.md, "Runbooks"):
- one `Dashboard:` line per dashboard in its Diagnosis,
  `Dashboard: Grafana "<dashboard title>" (uid `<uid>`), panels "<panel>", "<panel>".`;
  the first line's first panel is the one the alert's notification links (monitoring/mixin/links);
- in prose, `"<dashboard title> › <panel>"`.
A quoted panel title in prose without its dashboard is unchecked text and fails here, as does a
dashboard title that no dashboard has. Each panel that links an alert's runbook (`Runbook: <alert>`)
is named by that runbook, so the two directions cannot drift apart. The saved sample search a
runbook names is one that `tokenpulse es setup` installs in Kibana. Reads the generated
dashboards/*.json; no stack.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from log_pipeline.assets import SEARCHES
from monitoring.mixin import links
from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.dashboards import build_models
from tokenpulse.paths import ROOT

MODELS = build_models(config)

RUNBOOKS = sorted((ROOT / "alerts" / "runbooks").glob("*.md"))
BOARDS = {
    (b := json.loads(p.read_text()))["uid"]: b for p in sorted((ROOT / "dashboards").glob("*.json"))
}
TITLES = {b["title"]: uid for uid, b in BOARDS.items()}
DASHBOARD_LINE = re.compile(r'^Dashboard: Grafana "([^"]+)" \(uid `([a-z0-9-]+)`\), panels (.+)\.$')
PROSE_REF = re.compile(r'"([^"›]+) › ([^"]+)"')
SEARCH_LINE = re.compile(r'^Saved sample search: Kibana "([^"]+)" \(`([a-z0-9-]+)`\)', re.M)
CODE = re.compile(r"^```.*?^```", re.M | re.S)


def _panels(board: dict) -> dict[str, str]:
    """Panel title -> type over the dashboard, rows and the panels inside collapsed rows."""
    out: dict[str, str] = {}
    for panel in board["panels"]:
        out[panel.get("title", "")] = panel["type"]
        out |= {p.get("title", ""): p["type"] for p in panel.get("panels", [])}
    return out


def dashboard_refs(text: str) -> list[tuple[str, str, list[str]]]:
    """(dashboard title, uid, [panel titles]) of each `Dashboard:` line, in order."""
    out = []
    for line in text.splitlines():
        if line.startswith("Dashboard:"):
            m = DASHBOARD_LINE.match(line)
            assert m, f"not the checkable form: {line}"
            out.append((m[1], m[2], re.findall(r'"([^"]+)"', m[3])))
    return out


def _prose(text: str) -> list[str]:
    """The runbook's lines outside code blocks and outside its `Dashboard:` lines."""
    lines = CODE.sub("", text).splitlines()
    return [line for line in lines if not line.startswith("Dashboard:")]


def problems(name: str, text: str) -> list[str]:
    """What a runbook names that no dashboard (or saved search) has, or names out of order."""
    bad = []
    refs = dashboard_refs(text)
    if not refs:
        return ["no Dashboard: line"]
    for title, uid, panels in refs:
        if uid not in BOARDS:
            bad.append(f"no dashboard uid {uid}")
            continue
        if BOARDS[uid]["title"] != title:
            bad.append(f"uid {uid} is {BOARDS[uid]['title']!r}, not {title!r}")
        have = _panels(BOARDS[uid])
        for panel in panels:
            if panel not in have:
                bad.append(f"{title} has no panel {panel!r}")
            elif have[panel] == "row":
                bad.append(f"{title} › {panel} is a row: name a panel in it")
    uid, panel_id = links.panel(config, MODELS, name)
    paged = next(p["title"] for p in BOARDS[uid]["panels"] if p["id"] == panel_id)
    first = (refs[0][1], refs[0][2][0] if refs[0][2] else "")
    if first != (uid, paged):
        bad.append(f"first panel is {first}, the notification links {(uid, paged)}")
    every_panel = {title for board in BOARDS.values() for title in _panels(board)}
    for line in _prose(text):
        for board, panel in PROSE_REF.findall(line):
            if board not in TITLES:
                bad.append(f"no dashboard {board!r}")
            elif panel not in _panels(BOARDS[TITLES[board]]):
                bad.append(f"{board} has no panel {panel!r}")
        for quoted in re.findall(r'"([^"]+)"', line):
            if quoted.startswith("TokenPulse / ") and " › " not in quoted and quoted not in TITLES:
                bad.append(f"no dashboard {quoted!r}")
            elif quoted in every_panel and quoted not in TITLES:
                bad.append(
                    f'panel {quoted!r} without its dashboard: write "<dashboard> › {quoted}"'
                )
    searches = {(title, sid) for sid, title, *_ in SEARCHES}
    for title, sid in SEARCH_LINE.findall(text):
        if (title, sid) not in searches:
            bad.append(f"no saved search {title!r} ({sid})")
    return bad


@pytest.mark.parametrize("path", RUNBOOKS, ids=lambda p: p.stem)
def test_runbook_names_panels_that_exist_page_panel_first(path: Path) -> None:
    assert problems(path.stem, path.read_text()) == []


def test_every_panel_linking_a_runbook_is_named_by_it() -> None:
    named = {
        (p.stem, uid, panel)
        for p in RUNBOOKS
        for _, uid, panels in dashboard_refs(p.read_text())
        for panel in panels
    }
    missing = []
    for uid, board in BOARDS.items():
        for panel in board["panels"]:
            for link in panel.get("links", []):
                alert = link["title"].removeprefix("Runbook: ")
                if alert != link["title"] and (alert, uid, panel["title"]) not in named:
                    missing.append(f"{alert}: {board['title']} › {panel['title']}")
    assert missing == []


def test_every_alert_links_a_panel_not_a_row() -> None:
    for name, (key, title) in [*config.alert_panels.items(), ("", config.default_panel)]:
        board = BOARDS[config.dashboard_uids[key]]
        assert _panels(board).get(title) not in (None, "row"), f"{name or 'default'}: {title}"


def test_the_checks_catch_what_they_are_for() -> None:
    """A renamed panel, a panel without its dashboard, another page panel: each one reported."""
    good = next(p for p in RUNBOOKS if p.stem == "TokenPulseGpuTemperatureHigh").read_text()
    assert problems("TokenPulseGpuTemperatureHigh", good) == []
    renamed = good.replace('panels "Temperature"', 'panels "GPU temperature"')
    assert any("no panel 'GPU temperature'" in p for p in problems("X", renamed))
    bare = good + '\nLook at "Power" too.\n'
    assert any("without its dashboard" in p for p in problems("TokenPulseGpuTemperatureHigh", bare))
    ref = good + '\nLook at "TokenPulse / GPUs › Powr" too.\n'
    assert any("has no panel 'Powr'" in p for p in problems("TokenPulseGpuTemperatureHigh", ref))
    assert any("first panel" in p for p in problems("TokenPulseGpuThrottled", good))


AGGREGATION = re.compile(r"\b(sum|max|min|avg|count|topk|bottomk|quantile|stddev)\b[^{]*\(")
MANY_NAMES = re.compile(r'__name__=~"[^"]*\|[^"]*"')


def merged_windows(query: str) -> bool:
    """A query that selects several recorded windows by name and aggregates them into one."""
    return bool(MANY_NAMES.search(query)) and bool(AGGREGATION.match(query.strip()))


def test_no_runbook_query_merges_the_windows_it_selects() -> None:
    """Each window is its own series: an aggregation over a `__name__=~"a|b"` selector (even
    `without (window)`, which also drops the name) collapses them into one."""
    bad = []
    for path in RUNBOOKS:
        for block in re.findall(r"```promql\n(.*?)```", path.read_text(), re.S):
            bad += [f"{path.stem}: {q}" for q in block.splitlines() if merged_windows(q)]
    assert bad == []
    assert merged_windows('max without (window) ({__name__=~"m:x:ratio_rate(5m|1h)",model="gen"})')
    assert not merged_windows('{__name__=~"m:x:ratio_rate(5m|1h)",model="gen"}')
    assert not merged_windows("max without (window) (m:x:ratio_rate5m)")
