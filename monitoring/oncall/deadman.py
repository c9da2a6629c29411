"""The receiver's own dead man's switch: a page of its own when the Watchdog stops arriving.

Alertmanager sends the always-firing Watchdog every `watchdog_interval`. When it stops, the thing
that died is Prometheus, Alertmanager or the path between them, and none of those can page about
it. So the receiver judges the silence itself: once the Watchdog is `late_factor` intervals
late it records a page (ALERTNAME, on the `pager` path, with its runbook) in its own notification
log, as if Alertmanager had sent it; when the Watchdog arrives again it records the page resolved.
Until the first arrival after a start (a restart too) the clock starts at the end of the start-up
grace (Prometheus and Alertmanager start after the receiver, and the Watchdog waits out its
`for`); the first arrival proves the path and ends the grace.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

ALERTNAME = "TokenPulseWatchdogMissing"
RECEIVER = "pager"  # the path of a page: whoever reads the log reads this as one
LABELS = {"alertname": ALERTNAME, "severity": "critical", "meta": "true", "team": "monitoring"}
NEVER = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt of a firing alert

Status = Literal["firing", "resolved"]


@dataclass(frozen=True)
class Event:
    """The page fired or resolved: when it started and how long the Watchdog had been silent."""

    status: Status
    starts_at: float
    silent_s: float


@dataclass(frozen=True)
class Timing:
    """How often the Watchdog comes, how late it may be, and the grace after a start."""

    interval_s: float
    late_factor: float
    grace_s: float

    @property
    def late_after_s(self) -> float:
        """Seconds of silence after which the Watchdog counts as missing."""
        return self.interval_s * self.late_factor


class DeadMansSwitch:
    """Tracks Watchdog arrivals; says when it went missing and when it came back."""

    def __init__(self, timing: Timing, started: float, last: float | None = None) -> None:
        self.timing = timing
        self.started = started
        self.last = last  # unix time of the latest arrival (from the log after a restart)
        self.missing_since: float | None = None  # when the page fired (None: not firing)
        self.pages = 0
        self.proven = False  # the Watchdog arrived since this start: the grace is over
        self._lock = threading.Lock()

    def deadline(self) -> float:
        """The unix time after which silence pages."""
        if self.proven and self.last is not None:
            return self.last + self.timing.late_after_s
        base = self.started + self.timing.grace_s
        if self.last is not None:
            base = max(base, self.last)
        return base + self.timing.late_after_s

    def _silent_since(self) -> float:
        return self.last if self.last is not None else self.started

    def arrived(self, at: float) -> Event | None:
        """The Watchdog arrived at `at`: the resolved page, if that ends one."""
        with self._lock:
            silent = at - self._silent_since()
            self.last = at if self.last is None else max(self.last, at)
            self.proven = True
            if self.missing_since is None:
                return None
            event = Event("resolved", self.missing_since, silent)
            self.missing_since = None
            return event

    def check(self, now: float) -> Event | None:
        """The firing page, the first time `now` is past the deadline with no arrival."""
        with self._lock:
            if self.missing_since is not None or now <= self.deadline():
                return None
            self.missing_since, self.pages = now, self.pages + 1
            return Event("firing", now, now - self._silent_since())

    def state(self, now: float) -> dict[str, Any]:
        """Whether the page fires, since when, and the deadline (for /watchdog and /metrics)."""
        with self._lock:
            return {
                "missing": self.missing_since is not None,
                "missing_since": _iso(self.missing_since) if self.missing_since else None,
                "late_after_s": self.timing.late_after_s,
                "deadline": _iso(self.deadline()),
                "seconds_to_deadline": round(self.deadline() - now, 3),
                "pages": self.pages,
            }


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).isoformat()


def page(event: Event, now: float, timing: Timing, public_url: str) -> dict[str, Any]:
    """The receiver's own page as an Alertmanager webhook notification (version 4), so that it
    is recorded, read and linked like every other."""
    what = "has not arrived for" if event.status == "firing" else "was missing for"
    notes = {
        "summary": "The Watchdog stopped arriving: alerts may reach nobody.",
        "description": (
            f"The on-call receiver's dead man's switch: the Watchdog {what} {event.silent_s:.0f} s "
            f"(it comes every {timing.interval_s:g} s and pages after {timing.late_after_s:g} s "
            "of silence). Prometheus, Alertmanager or the path between them is down; no other "
            "alert can tell you so."
        ),
        "runbook_url": f"{public_url.rstrip('/')}/runbooks/{ALERTNAME}",
    }
    alert = {
        "status": event.status,
        "labels": dict(LABELS),
        "annotations": notes,
        "startsAt": _iso(event.starts_at),
        "endsAt": _iso(now) if event.status == "resolved" else NEVER,
        "generatorURL": "",
        "fingerprint": "",
    }
    return {
        "version": "4",
        "status": event.status,
        "receiver": RECEIVER,
        "groupKey": f"oncall-receiver:{ALERTNAME}",
        "groupLabels": {"alertname": ALERTNAME},
        "commonLabels": dict(LABELS),
        "commonAnnotations": notes,
        "externalURL": public_url,
        "truncatedAlerts": 0,
        "alerts": [alert],
    }
