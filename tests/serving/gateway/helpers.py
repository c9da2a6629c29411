"""Small helpers shared by the gateway tests."""

from __future__ import annotations

import re

import httpx


def auth(key: str) -> dict[str, str]:
    """The header a client sends."""
    return {"Authorization": f"Bearer {key}"}


def metric_value(url: str, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels` (0 when absent)."""
    text = httpx.get(f"{url}/metrics").text
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
    return total
