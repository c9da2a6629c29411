"""Operator controls the gateway reads while it runs: the canary weight file.

`tokenpulse rollout canary-weight P` writes `{"canary_weight": W}` (W = P/100) to the file the
gateway's `canary_weight_file` names; the gateway checks it every second and routes that share of
callers to the canary. A file, not an endpoint: the public port gets no admin surface, and file
permissions are the access control, on the host of `tokenpulse up` as in a compose bind mount.
A file that cannot be read or holds a bad weight keeps the last good weight (logged once); a
removed file restores the start-up `canary_weight`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from aiohttp import web

from serving.gateway.routing import Router
from serving.gateway.settings import GatewaySettings
from tokenpulse.atomic import atomic_write
from tokenpulse.logging import get_logger

log = get_logger(__name__)
CHECK_INTERVAL_S = 1.0


class CanaryWeightFileError(ValueError):
    """A canary weight file that is not `{"canary_weight": <0..1>}`."""


def parse_canary_weight(text: str) -> float:
    """The weight in a canary weight file's text."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CanaryWeightFileError(f"not JSON: {exc.msg}") from exc
    weight = doc.get("canary_weight") if isinstance(doc, dict) else None
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1:
        raise CanaryWeightFileError('expected {"canary_weight": <number from 0 to 1>}')
    return float(weight)


def write_canary_weight(path: Path, weight: float) -> None:
    """Replace the file atomically (a reader never sees half of it)."""
    if not 0 <= weight <= 1:
        raise CanaryWeightFileError(f"canary weight {weight} is outside 0..1")
    path.parent.mkdir(parents=True, exist_ok=True)
    # 0644: the gateway may run as another user (a container)
    atomic_write(path, json.dumps({"canary_weight": weight}) + "\n", 0o644)


class CanaryWeightFile:
    """Applies the file's weight to the router whenever the file changes."""

    def __init__(self, path: Path, router: Router, default: float) -> None:
        self.path = path
        self.router = router
        self.default = default
        self._stamp: tuple[int, int, int] | None = None
        self._task: asyncio.Task[None] | None = None

    def check(self) -> None:
        """One look at the file; applies a changed weight."""
        try:
            st = self.path.stat()
            stamp: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            stamp = None
        if stamp == self._stamp:
            return
        self._stamp = stamp
        if stamp is None:
            self._apply(self.default, "file removed: start-up weight")
            return
        try:
            weight = parse_canary_weight(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, CanaryWeightFileError) as exc:
            log.error(
                "cannot read canary weight file; keeping the current weight",
                file=str(self.path), error=str(exc), canary_weight=self.router.canary_weight,
            )  # fmt: skip
            return
        self._apply(weight, "file")

    def _apply(self, weight: float, source: str) -> None:
        if weight != self.router.canary_weight:
            log.info(
                "canary weight changed", canary_weight=weight,
                previous=self.router.canary_weight, source=source,
            )  # fmt: skip
        self.router.canary_weight = weight

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(CHECK_INTERVAL_S)
            self.check()

    async def _start(self, app: web.Application) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def _stop(self, app: web.Application) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def install(app: web.Application, router: Router, settings: GatewaySettings) -> None:
    """Watch the canary weight file (when set) for the app's lifetime; it applies from the start."""
    if settings.canary_weight_file is None:
        return
    watcher = CanaryWeightFile(settings.canary_weight_file, router, settings.canary_weight)
    watcher.check()
    app.on_startup.append(watcher._start)
    app.on_cleanup.append(watcher._stop)
