"""Point a rendered rule file's runbook and dashboard links at another site.

The committed rule files link config.RUNBOOK_URL_PATTERN and config.GRAFANA_URL; a stack that
serves its runbooks elsewhere (the local stack: its own on-call receiver, on whatever port) runs a
copy with its own. Light on purpose (no dashboard build): the stack layer calls it at start-up.
"""

from __future__ import annotations

from typing import Any

import yaml

from monitoring.mixin import config as c


def relink(text: str, runbook_url_pattern: str, grafana_url: str, header: str = "") -> str:
    """A rendered rule file with every alert's runbook and dashboard links moved elsewhere."""
    doc: dict[str, Any] = yaml.safe_load(text) or {}
    base = c.GRAFANA_URL.rstrip("/")
    for group in doc.get("groups", []):
        for rule in group.get("rules", []):
            notes = rule.get("annotations")
            if "alert" not in rule or not notes:
                continue
            if "runbook_url" in notes:
                notes["runbook_url"] = runbook_url_pattern.format(alertname=rule["alert"])
            url = notes.get("dashboard_url", "")
            if url.startswith(base):
                notes["dashboard_url"] = grafana_url.rstrip("/") + url[len(base) :]
    return header + yaml.safe_dump(doc, sort_keys=False, width=100)
