"""Alertmanager's webhook notification (version 4), checked field by field before it is recorded.

A notification that does not have this shape is refused whole with the first wrong field named
(`alerts[0].labels: ...`), so nothing half-valid reaches the file or the terminal, and the sender
gets an answer instead of a dropped connection.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictStr, ValidationError

Strings = dict[StrictStr, StrictStr]


class BadNotification(ValueError):
    """The body is not an Alertmanager webhook notification."""


class _Alert(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    status: Literal["firing", "resolved"] = "firing"
    labels: Strings
    annotations: Strings = {}
    startsAt: StrictStr = ""  # noqa: N815 (Alertmanager's field names)
    endsAt: StrictStr = ""  # noqa: N815
    generatorURL: StrictStr = ""  # noqa: N815
    fingerprint: StrictStr = ""


class _Notification(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    version: StrictStr = "4"
    status: Literal["firing", "resolved"] = "firing"
    receiver: StrictStr = ""
    groupKey: StrictStr = ""  # noqa: N815
    groupLabels: Strings = {}  # noqa: N815
    commonLabels: Strings = {}  # noqa: N815
    commonAnnotations: Strings = {}  # noqa: N815
    externalURL: StrictStr = ""  # noqa: N815
    truncatedAlerts: int = 0  # noqa: N815
    alerts: list[_Alert]


def field_path(loc: tuple[int | str, ...]) -> str:
    """('alerts', 0, 'labels') -> 'alerts[0].labels'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_notification(body: bytes) -> dict[str, Any]:
    """The webhook document as sent, once every field it must or may carry has its type."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past Python's limit
        raise BadNotification("body is not JSON") from exc
    if not isinstance(doc, dict):
        raise BadNotification("body must be a JSON object")
    try:
        _Notification.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = field_path(tuple(first["loc"])) or "body"
        raise BadNotification(f"{where}: {first['msg'].lower()}") from exc
    return doc
