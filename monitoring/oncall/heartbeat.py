"""Relay each Watchdog arrival to an external dead man's switch (a heartbeat URL).

Alertmanager 0.25 (the version compose runs) reads a webhook URL only from its config file, and a
heartbeat URL carries its secret (healthchecks.io's `https://hc-ping.com/<uuid>`, an Opsgenie
heartbeat's `?apiKey=`), so the committed config cannot name it. The Watchdog therefore goes to
this receiver, and the receiver pings the URL it was given in its environment, with an optional
Authorization header (Opsgenie: `GenieKey <key>`). Every link of the chain (Prometheus,
Alertmanager, this receiver, the network out) stopping stops the pings, which is what the
external switch alarms on. A ping runs on its own thread, one at a time, so a slow heartbeat
service never delays Alertmanager's webhook answer.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request

from tokenpulse.logging import get_logger

log = get_logger(__name__)

RESULTS = ("ok", "failed", "skipped")  # skipped: the previous ping was still in flight


class Heartbeat:
    """Pings one URL (POST, empty JSON body) per Watchdog arrival; counts the outcomes."""

    def __init__(self, url: str, authorization: str = "", timeout_s: float = 10.0) -> None:
        self.url = url
        self.authorization = authorization
        self.timeout_s = timeout_s
        self.counts = dict.fromkeys(RESULTS, 0)
        self._busy = threading.Lock()
        self._count_lock = threading.Lock()

    def _count(self, result: str) -> None:
        with self._count_lock:
            self.counts[result] += 1

    def ping(self) -> threading.Thread | None:
        """Send one ping in the background; the thread (None when one is still in flight)."""
        if not self._busy.acquire(blocking=False):
            self._count("skipped")
            return None
        thread = threading.Thread(target=self._send, name="heartbeat", daemon=True)
        thread.start()
        return thread

    def _send(self) -> None:
        try:
            req = urllib.request.Request(self.url, data=b"{}", method="POST")
            req.add_header("Content-Type", "application/json")
            if self.authorization:
                req.add_header("Authorization", self.authorization)
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                resp.read()
            self._count("ok")
        except (OSError, ValueError) as exc:  # HTTPError and URLError are OSErrors
            self._count("failed")
            # never the URL: it carries the secret
            log.warning("heartbeat_failed", error=type(exc).__name__, status=_status(exc))
        finally:
            self._busy.release()


def _status(exc: Exception) -> int | None:
    return exc.code if isinstance(exc, urllib.error.HTTPError) else None
