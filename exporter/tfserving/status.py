"""Model version status, polled from TF Serving in the background and read by collectors.

One tracker serves both the `tfserving` collector (states, labels, reachability, time of the last
change) and the canary runner (which versions to probe). Polling off the scrape path keeps a slow
model server from slowing scrapes, and gives state changes a finer timestamp than scrapes.

A version's series stay while the version is configured (a label or a `specific` policy names it)
or was seen AVAILABLE within `retention_s`: a model server that dies must show as failing
versions, not as versions that vanish.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from exporter.tfserving.client import TfServingClient
from exporter.tfserving.models import ConfigTargets, StaticTargets
from tokenpulse.logging import get_logger
from tokenpulse.tfserving.errors import TfServingError
from tokenpulse.tfserving.status import VersionStatus, available_versions

# Bound here too: contextvars bound in main() do not reach the exporter's threads.
log = get_logger(__name__).bind(component="exporter")

VERSION_RETENTION_S = 600.0  # keep an unseen version's series this long after it was AVAILABLE


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
    last_available: tuple[int, ...] = ()  # AVAILABLE at the last poll that got an answer
    retained: tuple[int, ...] = ()  # versions whose series stay (configured or recently seen)

    def available_versions(self) -> list[int]:
        """Versions in state AVAILABLE, newest first."""
        return available_versions(list(self.versions))


@dataclass(frozen=True)
class StatusSnapshot:
    """Every model at one poll, plus whether the config file is readable."""

    models: tuple[ModelSnapshot, ...]
    polled_at: float | None  # None: never polled yet
    config_error: str | None = None


def _newest_first(*groups: Iterable[int]) -> tuple[int, ...]:
    return tuple(sorted(set().union(*groups), reverse=True))


class StatusTracker:
    """Polls `GET /v1/models/{name}` for every configured model and remembers state changes."""

    def __init__(
        self,
        client: TfServingClient,
        targets: StaticTargets | ConfigTargets,
        clock: Callable[[], float] = time.time,
        retention_s: float = VERSION_RETENTION_S,
    ) -> None:
        self._client = client
        self._targets = targets
        self._clock = clock
        self._retention_s = retention_s
        self._lock = threading.Lock()
        self._snapshot = StatusSnapshot(models=(), polled_at=None)
        self._last: dict[str, dict[int, tuple[str, float]]] = {}  # model -> version -> state, since
        self._model_changed: dict[str, float] = {}
        self._seen: dict[str, dict[int, float]] = {}  # model -> version -> last seen AVAILABLE
        self._available: dict[str, tuple[int, ...]] = {}  # AVAILABLE at the last answered poll
        self._up: dict[str, bool] = {}
        self._listeners: list[Callable[[], None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add_listener(self, callback: Callable[[], None]) -> None:
        """Call `callback()` (from the poll thread) when a version changes state or a model
        becomes reachable or unreachable."""
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
                error = None
            except TfServingError as exc:
                versions, error = [], str(exc)
            up = error is None
            changed |= self._up.get(entry.name, up) != up
            self._up[entry.name] = up
            if up:
                changed |= self._record(entry.name, versions, now)
            seen = self._remember(entry.name, versions if up else None, now)
            models.append(
                ModelSnapshot(
                    name=entry.name,
                    base_path=entry.base_path,
                    labels=dict(entry.labels),
                    up=up,
                    error=error,
                    versions=tuple(versions),
                    changed_at={v: s for v, (_, s) in self._last.get(entry.name, {}).items()},
                    model_changed_at=self._model_changed.get(entry.name) if up else None,
                    last_available=self._available.get(entry.name, ()),
                    retained=_newest_first(seen, entry.versions, entry.labels.values()),
                )
            )
        snap = StatusSnapshot(models=tuple(models), polled_at=now, config_error=config_error)
        with self._lock:
            self._snapshot = snap
        if changed:
            for callback in self._listeners:
                callback()
        return snap

    def _remember(self, model: str, versions: list[VersionStatus] | None, now: float) -> list[int]:
        """Note AVAILABLE versions (None: no answer); the versions seen within the retention."""
        seen = self._seen.setdefault(model, {})
        if versions is not None:
            self._available[model] = tuple(available_versions(versions))
            for v in self._available[model]:
                seen[v] = now
        for v in [v for v, at in seen.items() if now - at > self._retention_s]:
            del seen[v]
        return list(seen)

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
