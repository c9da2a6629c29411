"""Run a promtool unit-test file on the rules its assertions read, and only those.

promtool evaluates every rule of its rule files at every step of every test, yet a test file's
assertions read only the alerts its `alert_rule_test` cases name and the series its
`promql_expr_test` cases query. A rule's value depends on other rules only through the series
they write: a recording rule's name, and an alert's `ALERTS` and `ALERTS_FOR_STATE` series. So
the rules the assertions reach, followed through what each reads, evaluate to the same samples
with or without the rest, and the rest is evaluation for nothing (two to five times the CPU on
most files). Where a read cannot be narrowed (an `ALERTS` selector on a label an alert sets from
its query, a `__name__` regex), every rule it could mean is kept.

The rules are the committed files, rule for rule and in their groups' order; only the rules no
assertion reaches are left out, in a copy beside the copied test file.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

ALERT_SERIES = ("ALERTS", "ALERTS_FOR_STATE")
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_SELECTOR = re.compile(r"\b(ALERTS(?:_FOR_STATE)?)\b\s*(\{[^}]*\})?")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_NAME_MATCHER = re.compile(r'__name__\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Rule:
    """One rule of a group: what it writes (a recording's name or an alert's) and reads."""

    name: str
    alert: bool
    expr: str
    labels: dict[str, str]


def _matches(op: str, pattern: str, value: str) -> bool:
    if op in ("=", "!="):
        return (value == pattern) == (op == "=")
    return bool(re.fullmatch(pattern, value)) == (op == "=~")


def _alerts_selected(selector: str, alerts: list[Rule]) -> set[str]:
    """The alerts an `ALERTS{...}` selector can match: by name, and by the labels each alert
    sets to a constant; a label an alert may set from its query keeps that alert."""
    chosen = set()
    matchers = _MATCHER.findall(selector)
    for rule in alerts:
        keep = True
        for label, op, pattern in matchers:
            if label == "alertname":
                value: str | None = rule.name
            elif label == "alertstate":
                value = None  # pending or firing: a state, not a property of the rule
            else:
                set_to = rule.labels.get(label)
                value = None if set_to is None or "{{" in set_to else set_to
            if value is not None and not _matches(op, pattern, value):
                keep = False
                break
        if keep:
            chosen.add(rule.name)
    return chosen


def reads(expr: str, rules: list[Rule]) -> set[str]:
    """The names of the rules whose series `expr` can read."""
    alerts = [r for r in rules if r.alert]
    recorded = {r.name for r in rules if not r.alert}
    found = {name for name in _NAME.findall(expr) if name in recorded}
    for _, selector in _SELECTOR.findall(expr):
        found |= _alerts_selected(selector or "{}", alerts)
    for op, pattern in _NAME_MATCHER.findall(expr):
        for series in (*recorded, *ALERT_SERIES):
            if _matches(op, pattern, series):
                found |= {r.name for r in alerts} if series in ALERT_SERIES else {series}
    return found


def reached(seeds: set[str], rules: list[Rule]) -> set[str]:
    """The rules the seeds name, and every rule they read, transitively."""
    by_name: dict[str, list[Rule]] = {}
    for rule in rules:
        by_name.setdefault(rule.name, []).append(rule)
    seen: set[str] = set()
    todo = list(seeds)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for rule in by_name.get(name, []):
            todo += reads(rule.expr, rules)
    return seen


def _rules(doc: dict) -> list[Rule]:
    return [
        Rule(
            r.get("alert") or r["record"],
            "alert" in r,
            str(r["expr"]),
            {k: str(v) for k, v in (r.get("labels") or {}).items()},
        )
        for group in doc["groups"]
        for r in group["rules"]
    ]


def assertions_read(test_doc: dict, rules: list[Rule]) -> set[str]:
    """The rules a test file's assertions name or query."""
    seeds: set[str] = set()
    for test in test_doc["tests"]:
        seeds |= {case["alertname"] for case in test.get("alert_rule_test", [])}
        for case in test.get("promql_expr_test", []):
            seeds |= reads(str(case["expr"]), rules)
    return seeds


def narrowed(test_file: Path, workdir: Path) -> Path:
    """A copy of `test_file` in `workdir` over copies of its rule files that keep only the rules
    its assertions reach (groups in the same order; `group_eval_order` follows)."""
    test_doc = yaml.safe_load(test_file.read_text())
    sources = [(test_file.parent / name).resolve() for name in test_doc["rule_files"]]
    docs = [yaml.safe_load(path.read_text()) for path in sources]
    rules = [rule for doc in docs for rule in _rules(doc)]
    keep = reached(assertions_read(test_doc, rules), rules)
    workdir.mkdir(parents=True, exist_ok=True)
    names, groups_left = [], []
    for i, (path, doc) in enumerate(zip(sources, docs, strict=True)):
        groups = []
        for group in doc["groups"]:
            kept = [r for r in group["rules"] if (r.get("alert") or r["record"]) in keep]
            if kept:
                groups.append({**group, "rules": kept})
                groups_left.append(group["name"])
        name = f"{i}-{path.name}"
        (workdir / name).write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
        names.append(name)
    test_doc["rule_files"] = names
    if "group_eval_order" in test_doc:
        test_doc["group_eval_order"] = [g for g in test_doc["group_eval_order"] if g in groups_left]
    out = workdir / test_file.name
    out.write_text(yaml.safe_dump(test_doc, sort_keys=False))
    return out


def run_test_file(test_file: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    """`promtool test rules` on the narrowed copy of `test_file`."""
    path = narrowed(test_file, workdir)
    return subprocess.run(
        ["promtool", "test", "rules", path.name],
        capture_output=True, text=True, timeout=600, cwd=path.parent,
        env={**os.environ, "GOGC": os.environ.get("GOGC", "400")},
    )  # fmt: skip
