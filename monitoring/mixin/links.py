"""The links an alert carries: its runbook and its dashboard panel, one home for both.

`dashboard_url` resolves the panel of config.ALERT_PANELS in the built dashboards, so a renamed
panel fails the build instead of linking nowhere (monitoring/mixin/relink.py moves both links of
a rendered rule file elsewhere). The time range is no part of these URLs: Prometheus does not
know when an alert started; the notification templates and the on-call receiver add `from`/`to`
around `startsAt` (config.LINK_WINDOW).
"""

from __future__ import annotations

import functools

from monitoring.mixin import config as c
from monitoring.mixin.dashboards import build_model


class UnknownPanel(ValueError):
    """config.ALERT_PANELS names a panel title that its dashboard does not have."""


@functools.cache
def _panel_ids(key: str) -> dict[str, int]:
    model = build_model(key)
    return {p["title"]: p["id"] for p in model.get("panels", []) if p.get("title")}


def panel(alertname: str) -> tuple[str, int]:
    """(dashboard UID, panel id) of the panel that shows an alert's signal."""
    name = alertname.removeprefix(c.ALERT_PREFIX)
    key, title = c.ALERT_PANELS.get(name) or next(
        (v for k, v in c.ALERT_PANELS.items() if name.startswith(k)),
        c.DEFAULT_PANEL,
    )
    ids = _panel_ids(key)
    if title not in ids:
        raise UnknownPanel(f"dashboard {c.DASHBOARD_UIDS[key]!r} has no panel {title!r}")
    return c.DASHBOARD_UIDS[key], ids[title]


def dashboard_url(alertname: str, grafana_url: str = c.GRAFANA_URL) -> str:
    """The Grafana URL of the alert's panel, without the time range."""
    uid, panel_id = panel(alertname)
    return f"{grafana_url.rstrip('/')}/d/{uid}/?viewPanel={panel_id}"
