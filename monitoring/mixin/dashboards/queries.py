"""Read the queries back out of dashboard JSON: per panel, with Grafana's variables substituted.

The live-Prometheus test, the lint and the preview all go through here, so they see exactly the
PromQL that Grafana would send.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# what Grafana sends for a multi-value variable with "All" selected (our allValue)
ALL = ".*"
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
    "unless", "offset", "inf", "nan",
}  # fmt: skip
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")


@dataclass(frozen=True)
class PanelQuery:
    """One target of one panel."""

    dashboard: str  # uid
    panel: str  # title
    panel_type: str
    ref_id: str
    expr: str
    legend: str
    instant: bool = False  # Grafana asks for the last value only


def panel_queries(model: Mapping[str, Any]) -> Iterator[PanelQuery]:
    """Every Prometheus target of every panel (rows excluded), in reading order."""
    for panel in model.get("panels", []):
        if panel.get("type") == "row":
            continue
        for target in panel.get("targets", []):
            yield PanelQuery(
                model["uid"], panel.get("title", ""), panel["type"], target.get("refId", ""),
                target.get("expr", ""), target.get("legendFormat", ""),
                bool(target.get("instant")),
            )  # fmt: skip


def annotation_exprs(model: Mapping[str, Any]) -> list[str]:
    """PromQL of the dashboard's Prometheus annotation queries."""
    return [a["expr"] for a in model.get("annotations", {}).get("list", []) if a.get("expr")]


def variable_names(model: Mapping[str, Any]) -> list[str]:
    """Names of the dashboard's template variables."""
    return [v["name"] for v in model.get("templating", {}).get("list", [])]


def substitute(expr: str, rate_interval: str, values: Mapping[str, str] | None = None) -> str:
    """Replace `$__rate_interval` and `$var`/`${var}`: unknown variables become All (`.*`).

    `$1` is no variable (Grafana leaves it too): label_replace's reference to a regex group.
    """
    values = values or {}
    expr = expr.replace("$__rate_interval", rate_interval)

    def repl(m: re.Match[str]) -> str:
        return values.get(m.group(1) or m.group(2), ALL)

    return re.sub(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)", repl, expr)


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (functions, keywords and labels left out)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges
    text = re.sub(r"\boffset\s+-?\w+", " ", text)  # offsets
    text = _GROUPING.sub(" ", text)
    text = re.sub(r"(?<![\w:])\d+(?:\.\d*)?(?:[eE][+-]?\d+)?", " ", text)  # numbers
    names = set()
    for m in _IDENT.finditer(text):
        name = m.group(0)
        rest = text[m.end() :].lstrip()
        if rest.startswith("(") or name.lower() in _KEYWORDS:
            continue
        names.add(name)
    return names
