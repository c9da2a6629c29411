"""Which metrics the rules, dashboards and runbooks select, and which of those nobody declares.

Static: it reads the generated files and the runbooks' PromQL blocks, never a live Prometheus.
The caller passes the catalogue of declared metric names (the stack layer gathers it from every
component); what a recording rule records counts as declared.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import yaml

from monitoring.mixin.dashboards.queries import annotation_exprs, metric_names, panel_queries
from tokenpulse import paths

DASHBOARDS = paths.DASHBOARDS.relative_to(paths.ROOT)
RUNBOOKS = (paths.ALERTS / "runbooks").relative_to(paths.ROOT)
_PROMQL_BLOCK = re.compile(r"^```promql\n(.*?)^```", re.M | re.S)


def _rules(text: str) -> list[dict[str, str]]:
    doc = yaml.safe_load(text) or {}
    return [rule for group in doc.get("groups", []) for rule in group.get("rules", [])]


def recorded(files: Mapping[Path, str]) -> set[str]:
    """Names the recording rules among `files` record."""
    return {
        rule["record"]
        for path, text in files.items()
        if path.name.endswith(".rules.yml")
        for rule in _rules(text)
        if "record" in rule
    }


def runbook_queries(text: str) -> list[str]:
    """The PromQL of a runbook: one query a line of its ```promql blocks (comments left out)."""
    lines = (line.strip() for block in _PROMQL_BLOCK.findall(text) for line in block.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def queries(path: Path, text: str) -> Iterator[tuple[str, str]]:
    """(where in the file, PromQL) of every query a rule file, dashboard or runbook holds."""
    if path.name.endswith(".rules.yml"):
        for rule in _rules(text):
            yield f"rule {rule.get('record') or rule.get('alert')}", rule["expr"]
    elif path.parent == DASHBOARDS and path.suffix == ".json":
        model = json.loads(text)
        for q in panel_queries(model):
            yield f"panel {q.panel!r} query {q.ref_id}", q.expr
        for expr in annotation_exprs(model):
            yield "annotation", expr
    elif path.parent == RUNBOOKS and path.suffix == ".md":
        for expr in runbook_queries(text):
            yield "PromQL block", expr


def undeclared(files: Mapping[Path, str], known: set[str]) -> list[str]:
    """One line per metric a query selects that is neither in `known` nor recorded by a rule."""
    declared = known | recorded(files)
    problems = []
    for path in sorted(files):
        for where, expr in queries(path, files[path]):
            for metric in sorted(metric_names(expr) - declared):
                problems.append(f"{path}: {where}: {metric} is declared by no component")
    return problems
