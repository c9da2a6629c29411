"""Model status documents of TF Serving's REST API, and the version states.

`GET /v1/models/{name}` answers
`{"model_version_status": [{"version": "2", "state": "AVAILABLE", "status": {"error_code": "OK",
"error_message": ""}}]}`: versions are strings, newest first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenpulse.tfserving.errors import TfServingBadResponse

# ModelVersionStatus.State (apis/get_model_status.proto): name -> number, in lifecycle order.
STATE_NUMBER: dict[str, int] = {
    "START": 10,
    "LOADING": 20,
    "AVAILABLE": 30,
    "UNLOADING": 40,
    "END": 50,
    "UNKNOWN": 0,
}
VERSION_STATES: tuple[str, ...] = tuple(STATE_NUMBER)
AVAILABLE = "AVAILABLE"


@dataclass(frozen=True)
class VersionStatus:
    """One entry of `model_version_status`."""

    version: int
    state: str  # one of VERSION_STATES
    error_code: str = "OK"
    error_message: str = ""


def status_path(model: str, version: int | None = None) -> str:
    """The REST path of a model's status (`model` must already be URL-safe)."""
    return f"/v1/models/{model}" + (f"/versions/{int(version)}" if version is not None else "")


def parse_model_status(doc: object) -> list[VersionStatus]:
    """Check and convert a status document; unknown states become UNKNOWN."""
    entries = doc.get("model_version_status") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise TfServingBadResponse("status has no model_version_status list")
    out: list[VersionStatus] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise TfServingBadResponse("model_version_status entry is not an object")
        try:
            version = int(entry["version"])
        except (KeyError, TypeError, ValueError) as exc:
            raise TfServingBadResponse("model_version_status entry without a version") from exc
        state = entry.get("state")
        if not isinstance(state, str):
            raise TfServingBadResponse(f"version {version} has no state")
        raw_status = entry.get("status")
        status: dict[str, Any] = raw_status if isinstance(raw_status, dict) else {}
        out.append(
            VersionStatus(
                version=version,
                state=state if state in STATE_NUMBER else "UNKNOWN",
                error_code=str(status.get("error_code", "OK") or "OK"),
                error_message=str(status.get("error_message", "") or ""),
            )
        )
    return out


def available_versions(statuses: list[VersionStatus]) -> list[int]:
    """Versions in state AVAILABLE, newest first."""
    return sorted((s.version for s in statuses if s.state == AVAILABLE), reverse=True)
