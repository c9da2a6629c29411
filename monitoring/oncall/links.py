"""The links of one received alert, as the Slack and PagerDuty templates give them.

A webhook carries the alert, not rendered text, so the receiver adds what the templates add:
`from`/`to` of the mixin's link_window around the alert's start on its dashboard panel, and a sample
search of that window (here: the receiver's own /samples page, which gives the command).
"""

from __future__ import annotations

import re
import shlex
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from monitoring.mixin.config import DEFAULT
from monitoring.mixin.promql import seconds

WATCHDOG = "Watchdog"
WINDOW = timedelta(seconds=seconds(DEFAULT.link_window))
# Alertmanager writes nanoseconds; Python reads at most microseconds
_FRACTION = re.compile(r"(\.\d{6})\d+")


def started(alert: dict[str, Any], default: datetime) -> datetime:
    """The alert's startsAt, or `default` when it has none that parses."""
    text = _FRACTION.sub(r"\1", str(alert.get("startsAt", "")))
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return default
    return when if when.tzinfo else default


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def alert_links(
    alert: dict[str, Any], external_url: str, public_url: str, now: datetime
) -> dict[str, str]:
    """runbook, dashboard (with the window), samples, source (Prometheus) and alertmanager."""
    labels, notes = alert.get("labels", {}), alert.get("annotations", {})
    start = started(alert, now)
    since, until = start - WINDOW, start + WINDOW
    out: dict[str, str] = {}
    if notes.get("runbook_url"):
        out["runbook"] = notes["runbook_url"]
    if notes.get("dashboard_url"):
        window = urlencode(
            {"from": int(since.timestamp() * 1000), "to": int(until.timestamp() * 1000)}
        )
        sep = "&" if "?" in notes["dashboard_url"] else "?"
        out["dashboard"] = f"{notes['dashboard_url']}{sep}{window}"
    if public_url:
        query = {k: labels[k] for k in ("model", "version") if labels.get(k)}
        query.update(since=_iso(since), until=_iso(until))
        out["samples"] = f"{public_url.rstrip('/')}/samples?{urlencode(query)}"
    if alert.get("generatorURL"):
        out["source"] = alert["generatorURL"]
    if external_url:
        out["alertmanager"] = external_url
    return out


def samples_command(args: dict[str, str]) -> str:
    """`tokenpulse samples search` for the given model, version, since and until."""
    words = ["tokenpulse", "samples", "search"]
    for key in ("model", "version", "since", "until"):
        if args.get(key):
            words += [f"--{key}", args[key]]
    return shlex.join(words)
