"""A small Alertmanager webhook receiver for the local stack, the compose deployment and tests.

Every POST (any path; the path names the receiver, e.g. /pager, /chat) must carry Alertmanager's
webhook JSON, checked field by field first (a 400 names the first wrong field; nothing is recorded).
Each notification is appended as one line to a JSON-lines file before the answer, with the links of
each alert (runbook, dashboard panel and sample search around its start, its Prometheus source),
and each alert becomes one readable line for whoever watches the terminal. The Watchdog, on its own
path, is recorded without a line; GET /watchdog says when it last arrived, so a dead man's switch
(or a drill) sees it stop. The receiver is a dead man's switch itself (monitoring/oncall/
deadman.py): when the Watchdog is `watchdog_late_factor` intervals late it records a page of its
own, TokenPulseWatchdogMissing on the `pager` path, and records it resolved when the Watchdog is
back; with `heartbeat_url` set it also relays each arrival to an external one (heartbeat.py).

GET /healthz answers 200; GET /metrics the Watchdog's arrivals, the switch and the relayed
pings; GET /notifications returns what the file holds (for tests and curious humans); GET
/runbooks/<alert> the alert's runbook as HTML (GET /runbooks: the list); GET
/samples?model=&version=&since=&until= how to search the samples of that window.
"""

from __future__ import annotations

import html
import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from monitoring.mixin.config import DEFAULT
from monitoring.mixin.promql import seconds
from monitoring.oncall import runbooks
from monitoring.oncall.deadman import ALERTNAME, RECEIVER, DeadMansSwitch, Event, Timing, page
from monitoring.oncall.heartbeat import Heartbeat
from monitoring.oncall.links import WATCHDOG, alert_links, samples_command, started
from monitoring.oncall.metrics import OncallCollector
from monitoring.oncall.payload import BadNotification, parse_notification
from tokenpulse import paths, ports
from tokenpulse.logging import get_logger
from tokenpulse.threaded_http import CappedHTTPServer

__all__ = [
    "BadNotification",
    "NotificationLog",
    "OncallSettings",
    "Receiver",
    "parse_notification",
    "serve",
]

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
    runbooks_dir: Path = Field(
        paths.ALERTS / "runbooks", description="the runbooks served at /runbooks/<alert>"
    )
    public_url: str = Field(
        f"http://127.0.0.1:{ports.ONCALL}",
        description="this receiver as a browser reaches it (the sample-search links point here)",
    )
    watchdog_switch: bool = Field(
        True,
        description="page TokenPulseWatchdogMissing when the Watchdog stops arriving (off where "
        "Alertmanager sends the Watchdog elsewhere: your own config, the Kubernetes runbooks pod)",
    )
    watchdog_interval: str = Field(
        DEFAULT.am_watchdog_interval,
        description="how often Alertmanager sends the Watchdog (its route's repeat_interval; "
        "`tokenpulse up --watchdog-interval`)",
    )
    watchdog_late_factor: float = Field(
        3.0,
        ge=1.5,
        description="the receiver pages TokenPulseWatchdogMissing once the Watchdog is this many "
        "intervals late (1.5 at least: one late notification is jitter, not an outage)",
    )
    watchdog_grace_s: float = Field(
        120.0,
        ge=0,
        description="seconds after the receiver starts before a missing Watchdog counts (the "
        "Watchdog first waits for Prometheus, Alertmanager and its own `for`)",
    )
    heartbeat_url: SecretStr = Field(
        SecretStr(""),
        description="an external dead man's switch pinged (POST) at every Watchdog arrival, e.g. "
        "https://hc-ping.com/<uuid>; it carries a secret: prefer the env var (empty: none)",
    )
    heartbeat_authorization: SecretStr = Field(
        SecretStr(""),
        description="Authorization header of each ping, e.g. `GenieKey <key>` for an Opsgenie "
        "heartbeat (prefer the env var; empty: none)",
    )

    @field_validator("watchdog_interval")
    @classmethod
    def _duration(cls, value: str) -> str:
        if seconds(value) <= 0:  # raises DurationError (a ValueError) on junk
            raise ValueError("the Watchdog interval must be positive")
        return value

    @field_validator("heartbeat_url")
    @classmethod
    def _heartbeat_url(cls, value: SecretStr) -> SecretStr:
        url = urlsplit(value.get_secret_value())
        if value.get_secret_value() and (url.scheme not in ("http", "https") or not url.netloc):
            raise ValueError("must be an http(s) URL (not shown: it carries a secret)")
        return value

    def timing(self) -> Timing:
        """The dead man's switch's timing."""
        interval = float(seconds(self.watchdog_interval))
        return Timing(interval, self.watchdog_late_factor, self.watchdog_grace_s)


def alert_line(receiver: str, alert: dict[str, Any], links: dict[str, str] | None = None) -> str:
    """One readable line: status, severity, name, labels that matter (model, version, ...),
    summary, runbook, then the dashboard panel and sample search of the alert's window."""
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
    parts += [f"{k}: {(links or {})[k]}" for k in ("dashboard", "samples") if k in (links or {})]
    # printable whatever the sender put in a label (a lone surrogate cannot be written as UTF-8)
    line = " ".join(p for p in parts if p)
    return line.encode("utf-8", "backslashreplace").decode("utf-8")


def _has_watchdog(alerts: list[dict[str, Any]]) -> bool:
    return any(a.get("labels", {}).get("alertname") == WATCHDOG for a in alerts)


class NotificationLog:
    """Appends notifications to the JSON-lines file, one writer at a time."""

    def __init__(
        self,
        path: Path,
        on_alert: Callable[[str], None],
        on_watchdog: Callable[[datetime], None] = lambda _: None,
    ) -> None:
        self.path = path
        self._on_alert = on_alert
        self._on_watchdog = on_watchdog  # after each Watchdog is written
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)  # alert texts and labels: private, as the keys file
        self.watchdog: datetime | None = None  # when the Watchdog last arrived
        self.watchdog_count = 0
        for entry in self.read():  # a restarted receiver still knows (a drill may restart it)
            if _has_watchdog(entry.get("alerts", [])):
                self.watchdog = datetime.fromisoformat(entry["received_at"])
                self.watchdog_count += 1

    def record(self, receiver: str, doc: dict[str, Any], public_url: str = "") -> None:
        """Append with each alert's links, then announce each alert but the Watchdog."""
        now = datetime.now(UTC)
        external = str(doc.get("externalURL", ""))
        links = [alert_links(a, external, public_url, now) for a in doc["alerts"]]
        entry = {"received_at": now.isoformat(), "receiver": receiver, **doc, "links": links}
        line = json.dumps(entry, sort_keys=True) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            if _has_watchdog(doc["alerts"]):
                self.watchdog, self.watchdog_count = now, self.watchdog_count + 1
        for alert, its_links in zip(doc["alerts"], links, strict=True):
            if alert["labels"].get("alertname") != WATCHDOG:
                self._on_alert(alert_line(receiver, alert, its_links))
        if _has_watchdog(doc["alerts"]):
            self._on_watchdog(now)

    def watchdog_state(self) -> dict[str, Any]:
        """When the Watchdog last arrived (None: not since start), how long ago, how often."""
        with self._lock:
            last, count = self.watchdog, self.watchdog_count
        age = (datetime.now(UTC) - last).total_seconds() if last else None
        return {
            "last_received_at": last.isoformat() if last else None,
            "age_s": age,
            "count": count,
        }

    def read(self) -> list[dict[str, Any]]:
        """Every notification so far."""
        with self._lock:
            text = self.path.read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def samples_page(query: str) -> str:
    """The sample search of a window: the command for the local store, and its parameters."""
    args = {k: v[0] for k, v in parse_qs(query).items() if k in SAMPLE_PARAMS and v}
    command = html.escape(samples_command(args))
    rows = "".join(f"<li>{html.escape(k)}: {html.escape(v)}</li>" for k, v in args.items())
    body = (
        f"<h1>Samples of the alert's window</h1><ul>{rows}</ul>"
        f"<p>On the machine that runs the stack:</p><pre><code>{command}</code></pre>"
        "<p>Add <code>--es-url</code> to search Elasticsearch instead of the local store.</p>"
    )
    return runbooks.PAGE.format(title="Sample search", body=body)


SAMPLE_PARAMS = ("model", "version", "since", "until")


class Receiver:
    """The notification log with the receiver's own dead man's switch and heartbeat relay."""

    def __init__(
        self,
        settings: OncallSettings,
        on_alert: Callable[[str], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.timing = settings.timing()
        self.store = NotificationLog(settings.file, on_alert, self._watchdog_arrived)
        last = self.store.watchdog.timestamp() if self.store.watchdog else None
        self.switch = DeadMansSwitch(self.timing, clock(), last)
        self.switch.missing_since = _open_page(self.store.read())  # a restart mid-page
        url = settings.heartbeat_url.get_secret_value()
        auth = settings.heartbeat_authorization.get_secret_value()
        self.heartbeat = Heartbeat(url, auth) if url else None
        self.registry = CollectorRegistry(auto_describe=False)
        collector = OncallCollector(
            self.switch, lambda: self.store.watchdog_count, self.heartbeat, clock
        )
        self.registry.register(collector)

    def check_every_s(self) -> float:
        """How often the switch is read: a fraction of the interval, within [0.2, 5] s."""
        return min(max(self.timing.interval_s / 4, 0.2), 5.0)

    def check(self) -> None:
        """Page once when the Watchdog is late (with the switch on)."""
        if not self.settings.watchdog_switch:
            return
        event = self.switch.check(self.clock())
        if event is not None:
            self._record(event)

    def _watchdog_arrived(self, at: datetime) -> None:
        if self.heartbeat is not None:
            self.heartbeat.ping()
        event = self.switch.arrived(at.timestamp())
        if event is not None:
            self._record(event)

    def _record(self, event: Event) -> None:
        doc = page(event, self.clock(), self.timing, self.settings.public_url)
        if event.status == "firing":
            log.warning("watchdog_missing", silent_s=round(event.silent_s, 1), alert=ALERTNAME)
        else:
            log.info("watchdog_back", silent_s=round(event.silent_s, 1), alert=ALERTNAME)
        self.store.record(RECEIVER, doc, self.settings.public_url)

    def watchdog_state(self) -> dict[str, Any]:
        """GET /watchdog: the last arrival and the switch."""
        switch = {"switch": self.settings.watchdog_switch, **self.switch.state(self.clock())}
        return {**self.store.watchdog_state(), **switch}


def _open_page(entries: list[dict[str, Any]]) -> float | None:
    """When the receiver's own page started, if the log's last word on it is firing."""
    status, since = "resolved", None
    for entry in entries:
        for alert in entry.get("alerts", []):
            if alert.get("labels", {}).get("alertname") == ALERTNAME:
                status, since = alert.get("status"), started(alert, datetime.now(UTC))
    return since.timestamp() if status == "firing" and since is not None else None


def make_handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to one receiver (its log, switch and settings)."""
    store, settings = receiver.store, receiver.settings

    class Handler(BaseHTTPRequestHandler):
        server_version = "tokenpulse-oncall"
        timeout = settings.timeout_s  # an idle or trickling connection is closed, its thread freed

        def _answer(self, status: int, doc: object) -> None:
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _html(self, status: int, text: str) -> None:
            body = text.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            url = urlsplit(self.path)
            path = url.path.rstrip("/") or "/"
            if path == "/healthz":
                self._answer(200, {"status": "ok"})
            elif path == "/notifications":
                self._answer(200, store.read())
            elif path == "/watchdog":
                self._answer(200, receiver.watchdog_state())
            elif path == "/metrics":
                body = generate_latest(receiver.registry)
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE_LATEST)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif path == "/runbooks":
                self._html(200, runbooks.index(settings.runbooks_dir))
            elif path.startswith("/runbooks/"):
                try:
                    page = runbooks.render(settings.runbooks_dir, path.removeprefix("/runbooks/"))
                except runbooks.RunbookNotFound:
                    self._html(404, runbooks.PAGE.format(title="Not found", body="no runbook"))
                    return
                self._html(200, page)
            elif path == "/samples":
                self._html(200, samples_page(url.query))
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
            store.record(receiver, doc, settings.public_url)
            self._answer(200, {"status": "recorded", "alerts": len(doc["alerts"])})

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            log.debug("http", request=format % args)

    return Handler


class OncallServer(CappedHTTPServer):
    """The HTTP server; while it serves, a thread reads the dead man's switch."""

    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver
        settings = receiver.settings
        super().__init__(
            (settings.host, settings.port), make_handler(receiver), settings.max_connections
        )

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve, and check the Watchdog's lateness, until shutdown()."""
        stop = threading.Event()

        def watch() -> None:
            while not stop.wait(self.receiver.check_every_s()):
                self.receiver.check()

        thread = threading.Thread(target=watch, name="deadman", daemon=True)
        thread.start()
        try:
            super().serve_forever(poll_interval)
        finally:
            stop.set()
            thread.join()


def serve(settings: OncallSettings, on_alert: Callable[[str], None]) -> OncallServer:
    """A bound server (not yet serving); call serve_forever() on it."""
    return OncallServer(Receiver(settings, on_alert))
