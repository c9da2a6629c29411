"""Small helpers shared by the gateway tests."""

from __future__ import annotations

import re

import httpx


def auth(key: str) -> dict[str, str]:
    """The header a client sends."""
    return {"Authorization": f"Bearer {key}"}


def samples(url: str, name: str, **labels: str) -> list[tuple[dict[str, str], float]]:
    """The samples of `name` on the /metrics page whose labels include `labels`."""
    text = httpx.get(f"{url}/metrics").text
    found: list[tuple[dict[str, str], float]] = []
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            found.append((have, float(m.group(3))))
    return found


def metric_value(url: str, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels` (0 when absent)."""
    return sum(value for _, value in samples(url, name, **labels))
