"""Model version status, polled from TF Serving in the background and read by collectors.

One tracker serves both the `tfserving` collector (states, labels, reachability, time of the last
change) and the canary runner (which versions are AVAILABLE). Polling off the scrape path keeps a
slow model server from slowing scrapes, and gives state changes a finer timestamp than scrapes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from exporter.modelconfig import ModelConfigError, ModelEntry, load_model_config
from exporter.tfserving_client import TfServingClient, TfServingError, VersionStatus
from tokenpulse.logging import get_logger

# Bound here too: contextvars bound in main() do not reach the exporter's threads.
log = get_logger(__name__).bind(component="exporter")


class StaticTargets:
    """Models given on the command line (no config file): fixed for the process lifetime."""

    def __init__(self, entries: list[ModelEntry]) -> None:
        self._entries = list(entries)

    def read(self) -> tuple[list[ModelEntry], str | None]:
        """The models, and no error."""
        return list(self._entries), None


class ConfigTargets:
    """Models from TF Serving's `--model_config_file`, re-read whenever the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries = load_model_config(path)  # a bad file at start-up is fatal
        self._mtime = self._stat()
        self._error: str | None = None

    def _stat(self) -> int | None:
        try:
            return self.path.stat().st_mtime_ns
        except OSError:
            return None

    def read(self) -> tuple[list[ModelEntry], str | None]:
        """The models of the last good version of the file, and why the current one is bad."""
        mtime = self._stat()
        if mtime != self._mtime:
            self._mtime = mtime
            try:
                self._entries = load_model_config(self.path)
                self._error = None
                log.info("model config reloaded", path=str(self.path), models=len(self._entries))
            except ModelConfigError as exc:
                self._error = str(exc)
                log.warning("model config unreadable, keeping last good", error=str(exc))
        return list(self._entries), self._error


@dataclass(frozen=True)
class ModelSnapshot:
    """What the last poll saw of one model."""

    name: str
    base_path: Path | None
    labels: dict[str, int]
    up: bool  # TF Serving answered for this model
    error: str | None  # why the poll failed, when it did
    versions: tuple[VersionStatus, ...] = ()
    changed_at: dict[int, float] = field(default_factory=dict)  # version -> last change (unix s)
    model_changed_at: float | None = None

    def available_versions(self) -> list[int]:
        """Versions in state AVAILABLE, newest first."""
        return sorted((v.version for v in self.versions if v.state == "AVAILABLE"), reverse=True)


@dataclass(frozen=True)
class StatusSnapshot:
    """Every model at one poll, plus whether the config file is readable."""

    models: tuple[ModelSnapshot, ...]
    polled_at: float | None  # None: never polled yet
    config_error: str | None = None


class StatusTracker:
    """Polls `GET /v1/models/{name}` for every configured model and remembers state changes."""

    def __init__(
        self,
        client: TfServingClient,
        targets: StaticTargets | ConfigTargets,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._targets = targets
        self._clock = clock
        self._lock = threading.Lock()
        self._snapshot = StatusSnapshot(models=(), polled_at=None)
        self._last: dict[str, dict[int, tuple[str, float]]] = {}  # model -> version -> state, since
        self._model_changed: dict[str, float] = {}
        self._listeners: list[Callable[[], None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add_listener(self, callback: Callable[[], None]) -> None:
        """Call `callback()` (from the poll thread) whenever some version changes state."""
        self._listeners.append(callback)

    def snapshot(self) -> StatusSnapshot:
        """The latest poll; never blocks on the network."""
        with self._lock:
            return self._snapshot

    def poll(self) -> StatusSnapshot:
        """Poll every model once and publish the result."""
        entries, config_error = self._targets.read()
        now = self._clock()
        changed = False
        models: list[ModelSnapshot] = []
        for entry in entries:
            try:
                versions = self._client.model_status(entry.name)
            except TfServingError as exc:
                models.append(
                    ModelSnapshot(entry.name, entry.base_path, dict(entry.labels), False, str(exc))
                )
                continue
            changed |= self._record(entry.name, versions, now)
            models.append(
                ModelSnapshot(
                    name=entry.name,
                    base_path=entry.base_path,
                    labels=dict(entry.labels),
                    up=True,
                    error=None,
                    versions=tuple(versions),
                    changed_at={v: since for v, (_, since) in self._last[entry.name].items()},
                    model_changed_at=self._model_changed.get(entry.name),
                )
            )
        snap = StatusSnapshot(models=tuple(models), polled_at=now, config_error=config_error)
        with self._lock:
            self._snapshot = snap
        if changed:
            for callback in self._listeners:
                callback()
        return snap

    def _record(self, model: str, versions: list[VersionStatus], now: float) -> bool:
        """Remember each version's state and when it last changed; True if anything changed."""
        previous = self._last.get(model, {})
        current: dict[int, tuple[str, float]] = {}
        changed = False
        for v in versions:
            old = previous.get(v.version)
            if old is not None and old[0] == v.state:
                current[v.version] = old
            else:
                current[v.version] = (v.state, now)
                changed = True
                log.info(
                    "model version state",
                    model=model,
                    version=v.version,
                    state=v.state,
                    error_code=v.error_code,
                    error_message=v.error_message,
                )
        if set(previous) - set(current):
            changed = True  # a version left the status list
        if changed or model not in self._model_changed:
            self._model_changed[model] = now
        self._last[model] = current
        return changed

    def start(self, interval_s: float) -> None:
        """Poll now and then every `interval_s` seconds in a daemon thread."""
        self._thread = threading.Thread(
            target=self._loop, args=(interval_s,), name="status-poller", daemon=True
        )
        self._thread.start()

    def _loop(self, interval_s: float) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:  # noqa: BLE001  (the poller must outlive any one bad poll)
                log.exception("status poll crashed")
            self._stop.wait(interval_s)

    def stop(self) -> None:
        """Stop the poll thread and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
