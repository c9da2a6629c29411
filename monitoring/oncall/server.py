"""A small Alertmanager webhook receiver for the local stack and tests.

Every POST (any path; the path names the receiver, e.g. /pager, /chat) must carry Alertmanager's
webhook JSON. Each notification is appended as one line to a JSON-lines file before the answer, and
each alert in it becomes one readable line for whoever watches the terminal. GET /healthz answers
200; GET /notifications returns what the file holds (for tests and curious humans).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tokenpulse import ports
from tokenpulse.logging import get_logger
from tokenpulse.threaded_http import CappedHTTPServer

log = get_logger(__name__)

MAX_BODY_BYTES = 4 << 20  # Alertmanager sends at most a few hundred KiB per notification


class OncallSettings(BaseSettings):
    """Where the receiver listens and where it writes."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_ONCALL_", extra="ignore")

    host: str = Field("127.0.0.1", description="listen address")
    port: int = Field(ports.ONCALL, ge=0, le=65535, description="listen port (0: any free)")
    file: Path = Field(
        Path("run/oncall.jsonl"), description="JSON-lines file notifications are appended to"
    )
    timeout_s: float = Field(
        10.0, gt=0, description="seconds a connection may wait between reads before it is closed"
    )
    max_connections: int = Field(
        64, ge=1, description="connections served at once; more get 503 and are closed"
    )


class BadNotification(ValueError):
    """The body is not an Alertmanager webhook notification."""


def parse_notification(body: bytes) -> dict[str, Any]:
    """The webhook document, checked for the fields a notification always has."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past Python's limit
        raise BadNotification("body is not JSON") from exc
    if not isinstance(doc, dict):
        raise BadNotification("body must be a JSON object")
    alerts = doc.get("alerts")
    if not isinstance(alerts, list) or not all(isinstance(a, dict) for a in alerts):
        raise BadNotification("'alerts' must be a list of objects")
    return doc


def alert_line(receiver: str, alert: dict[str, Any]) -> str:
    """One readable line: status, severity, name, labels that matter, summary, runbook."""
    labels = alert.get("labels") or {}
    notes = alert.get("annotations") or {}
    skip = {"alertname", "severity"}
    extra = " ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in skip)
    status = str(alert.get("status", "?")).upper()
    parts = [
        f"[{status}]",
        str(labels.get("severity", "-")),
        str(labels.get("alertname", "?")),
        extra,
        "-",
        str(notes.get("summary", "")),
        f"({notes.get('runbook_url', 'no runbook')})",
        f"-> {receiver}",
    ]
    # printable whatever the sender put in a label (a lone surrogate cannot be written as UTF-8)
    line = " ".join(p for p in parts if p)
    return line.encode("utf-8", "backslashreplace").decode("utf-8")


class NotificationLog:
    """Appends notifications to the JSON-lines file, one writer at a time."""

    def __init__(self, path: Path, on_alert: Callable[[str], None]) -> None:
        self.path = path
        self._on_alert = on_alert
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)  # alert texts and labels: private, as the keys file

    def record(self, receiver: str, doc: dict[str, Any]) -> None:
        """Append, then announce each alert."""
        entry = {"received_at": datetime.now(UTC).isoformat(), "receiver": receiver, **doc}
        line = json.dumps(entry, sort_keys=True) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
        for alert in doc["alerts"]:
            self._on_alert(alert_line(receiver, alert))

    def read(self) -> list[dict[str, Any]]:
        """Every notification so far."""
        with self._lock:
            text = self.path.read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def make_handler(store: NotificationLog, timeout_s: float) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to one notification log."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "tokenpulse-oncall"
        timeout = timeout_s  # an idle or trickling connection is closed, its thread freed

        def _answer(self, status: int, doc: object) -> None:
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path == "/healthz":
                self._answer(200, {"status": "ok"})
            elif self.path == "/notifications":
                self._answer(200, store.read())
            else:
                self._answer(404, {"error": "not found"})

        def do_POST(self) -> None:  # noqa: N802
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                self._answer(411, {"error": "Content-Length required"})
                return
            if length < 0 or length > MAX_BODY_BYTES:
                self._answer(413, {"error": "body too large"})
                return
            try:
                doc = parse_notification(self.rfile.read(length))
            except BadNotification as exc:
                self._answer(400, {"error": str(exc)})
                return
            receiver = self.path.strip("/") or str(doc.get("receiver", "default"))
            store.record(receiver, doc)
            self._answer(200, {"status": "recorded", "alerts": len(doc["alerts"])})

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            log.debug("http", request=format % args)

    return Handler


def serve(settings: OncallSettings, on_alert: Callable[[str], None]) -> ThreadingHTTPServer:
    """A bound server (not yet serving); call serve_forever() on it."""
    store = NotificationLog(settings.file, on_alert)
    handler = make_handler(store, settings.timeout_s)
    return CappedHTTPServer((settings.host, settings.port), handler, settings.max_connections)
