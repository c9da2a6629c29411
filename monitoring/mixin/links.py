"""The links an alert carries (its runbook and its dashboard panel), and a deployment's links
checked before anything is rendered with them.

`dashboard_url` resolves the panel of cfg.alert_panels in the dashboards' models, so a renamed
panel fails the build instead of linking nowhere. The time range is no part of these URLs:
Prometheus does not know when an alert started; the notification templates and the on-call
receiver add `from`/`to` around `startsAt` (cfg.link_window). Light on purpose (no Grafana SDK):
the stack layer and compose's `links` one-shot import it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from monitoring.mixin.config import Links, MixinConfig

# dashboard key (a cfg.dashboard_uids key) -> its model (the JSON, as a dict)
Models = Mapping[str, Mapping[str, Any]]
ALERTNAME = "{alertname}"
# characters a link may not hold: YAML and JSON quote or escape them, a shell splits on them
_UNSAFE = set(" \t\r\n\"'\\`<>{}|^")


class UnknownPanel(ValueError):
    """cfg.alert_panels names a panel title that its dashboard does not have."""


class LinkError(ValueError):
    """A deployment's link is malformed, or loopback where the on-call's phone cannot reach."""


def panel(cfg: MixinConfig, models: Models, alertname: str) -> tuple[str, int]:
    """(dashboard UID, panel id) of the panel that shows an alert's signal."""
    name = alertname.removeprefix(cfg.alert_prefix)
    key, title = cfg.alert_panels.get(name) or next(
        (v for k, v in cfg.alert_panels.items() if name.startswith(k)),
        cfg.default_panel,
    )
    ids = {p["title"]: p["id"] for p in models[key].get("panels", []) if p.get("title")}
    if title not in ids:
        raise UnknownPanel(f"dashboard {cfg.dashboard_uids[key]!r} has no panel {title!r}")
    return cfg.dashboard_uids[key], ids[title]


def dashboard_url(cfg: MixinConfig, models: Models, alertname: str) -> str:
    """The Grafana URL of the alert's panel, without the time range."""
    uid, panel_id = panel(cfg, models, alertname)
    return f"{cfg.links.grafana_url.rstrip('/')}/d/{uid}/?viewPanel={panel_id}"


def loopback(url: str) -> bool:
    """Whether a URL's host is this machine or its link: loopback, link-local, unspecified."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_link_local or ip.is_unspecified


def _fields(links: Links) -> dict[str, str]:
    fields = {
        "runbook_url_pattern": links.runbook_url_pattern,
        "grafana_url": links.grafana_url,
        "kibana_url": links.kibana_url,
    }
    if links.tensorboard_url:  # optional: without it the training dashboard links none
        fields["tensorboard_url"] = links.tensorboard_url
    return fields


def _shape(name: str, url: str) -> str | None:
    bare = url.replace(ALERTNAME, "") if name == "runbook_url_pattern" else url
    parts = urlsplit(bare)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{name} {url!r} is not an http(s) URL with a host"
    if _UNSAFE & set(bare):
        return f"{name} {url!r} holds a space, quote or bracket"
    if name == "runbook_url_pattern" and (url.count(ALERTNAME) != 1 or not url.endswith(ALERTNAME)):
        return f"{name} {url!r} does not end with {ALERTNAME}"
    if name != "runbook_url_pattern" and (url.endswith("/") or parts.query or parts.fragment):
        return f"{name} {url!r} is not a base URL (no trailing slash, query or fragment)"
    return None


def check(links: Links, deployment: str, *, allow_loopback: bool = False) -> Links:
    """`links` when well formed and, outside the local stack, not loopback; LinkError else."""
    for name, url in _fields(links).items():
        problem = _shape(name, url)
        if problem:
            raise LinkError(f"{deployment}: {problem}")
    if deployment == "local" or allow_loopback:
        return links
    for name, url in _fields(links).items():
        if loopback(url.replace(ALERTNAME, "")):
            raise LinkError(
                f"{deployment}: {name} {url!r} is a loopback address, dead on the on-call "
                f"engineer's phone; set TOKENPULSE_LINKS_{name.upper()} to an address their "
                "browser reaches (or TOKENPULSE_LINKS_ALLOW_LOOPBACK=true for a stack used on "
                "this machine only)"
            )
    return links
