"""The Prometheus HTTP API calls the previews and the dashboard proof need."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import httpx

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class PromError(Exception):
    """Prometheus could not be reached or refused the query (the message says which)."""


@dataclass(frozen=True)
class Series:
    """One result series: its labels and (unix time, value) points."""

    labels: dict[str, str]
    points: list[tuple[float, float]]


def seconds(duration: str) -> float:
    """A Prometheus duration such as 90s, 15m, 1h, 2d as seconds."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhdw])", duration.strip())
    if not m:
        raise PromError(f"bad duration {duration!r}: use e.g. 30s, 15m, 1h")
    return float(m.group(1)) * _UNITS[m.group(2)]


class PromClient:
    """`/api/v1/query`, `/api/v1/query_range` and label values of one Prometheus."""

    def __init__(self, base_url: str, timeout_s: float = 30.0) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise PromError(f"Prometheus URL must start with http:// or https://: {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self._client = httpx.Client(timeout=timeout_s)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def _get(self, path: str, params: dict[str, str], post: bool = True) -> Any:
        url = f"{self.base_url}{path}"
        try:
            if post:
                resp = self._client.post(url, data=params)
            else:  # an endpoint that takes GET only
                resp = self._client.get(url, params=params)
        except httpx.HTTPError as exc:
            raise PromError(f"cannot reach Prometheus at {self.base_url}: {exc}") from exc
        try:
            body = resp.json()
        except ValueError as exc:
            raise PromError(
                f"{url} answered {resp.status_code}, not JSON: not Prometheus?"
            ) from exc
        if body.get("status") != "success":
            raise PromError(f"{body.get('errorType', resp.status_code)}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[Series]:
        """Instant query."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self._get("/api/v1/query", params)
        if data["resultType"] == "scalar":
            return [Series({}, [(float(data["result"][0]), float(data["result"][1]))])]
        return [
            Series(r["metric"], [(float(r["value"][0]), float(r["value"][1]))])
            for r in data["result"]
        ]

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> list[Series]:
        """Range query."""
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}"}
        params["step"] = f"{step_s:g}"
        data = self._get("/api/v1/query_range", params)
        return [
            Series(r["metric"], [(float(t), float(v)) for t, v in r["values"]])
            for r in data["result"]
        ]

    def label_values(self, label: str, match: str, start: float, end: float) -> list[str]:
        """Values of `label` on the series `match` selects between start and end: the call
        Grafana makes for a `label_values(match, label)` variable over the dashboard's range."""
        params = {"match[]": match, "start": f"{start:.3f}", "end": f"{end:.3f}"}
        values: list[str] = self._get(f"/api/v1/label/{label}/values", params, post=False)
        return values
