"""A deployment's links, checked, and a rendered file moved to them.

Every generated file (rules, Alertmanager configs, dashboards) is rendered once with
config.LINKS, the local stack's addresses, which the committed files and the promtool tests
carry. A deployment's copy is the same text with the three bases swapped for its own: `up` at
start (its own ports), compose's `links` one-shot at start (monitoring/deploy_links.py), the
Kubernetes resources in `tokenpulse build` (monitoring/mixin/operator.py). Plain text, no YAML
round trip: each base appears only as the start of a URL, and `check` refuses a URL holding what
YAML or JSON would quote or escape, so the swap never changes a file's structure. Light on
purpose (config only): the stack layer and the compose one-shot import it.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from monitoring.mixin import config as c
from monitoring.mixin.config import Links

ALERTNAME = "{alertname}"
# characters a link may not hold: YAML and JSON quote or escape them, a shell splits on them
_UNSAFE = set(" \t\r\n\"'\\`<>{}|^")


class LinkError(ValueError):
    """A deployment's link is malformed, or loopback where the on-call's phone cannot reach."""


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
    return {
        "runbook_url_pattern": links.runbook_url_pattern,
        "grafana_url": links.grafana_url,
        "kibana_url": links.kibana_url,
    }


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


def _bases(links: Links) -> list[str]:
    return [
        links.runbook_url_pattern.removesuffix(ALERTNAME),  # every runbook, and the list of them
        f"{links.grafana_url}/d/",
        f"{links.kibana_url}/app/",
    ]


def relink(text: str, links: Links, header: str = "", base: Links = c.LINKS) -> str:
    """A rendered file's text (rendered with `base`) with every runbook, Grafana and Kibana link
    moved to `links`; `header` goes first."""
    check(links, "relink", allow_loopback=True)
    moves = dict(zip(_bases(base), _bases(links), strict=True))
    # one pass, longest base first: a new base that holds an old one is never moved twice
    pattern = re.compile("|".join(map(re.escape, sorted(moves, key=len, reverse=True))))
    return header + pattern.sub(lambda m: moves[m[0]], text)
