"""What the gateway keeps current while it runs: the keys file, each model's AVAILABLE versions
and labels (the status poll), and what each version can do (its signatures)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from serving.gateway.caps import VersionCaps
from serving.gateway.keys import KeysFileError, KeyStore
from serving.gateway.metrics import GatewayMetrics
from serving.gateway.replicas import Replicas
from serving.gateway.routing import ModelConfigError, Router
from serving.gateway.settings import GatewaySettings
from serving.gateway.upstream import UpstreamError, cancel_quietly
from tokenpulse.logging import get_logger

log = get_logger(__name__)


def _stamp(path: Path) -> tuple[int, int, int]:
    """What changes when the keys file is rewritten in place or replaced by a rename."""
    st = path.stat()
    return st.st_mtime_ns, st.st_size, st.st_ino


class Upkeep:
    """The keys file and the upstream's view, re-read in the background."""

    def __init__(
        self,
        settings: GatewaySettings,
        router: Router,
        upstreams: Replicas,
        metrics: GatewayMetrics,
    ) -> None:
        self.settings = settings
        self.router = router
        self.upstreams = upstreams
        self.metrics = metrics
        self.keys = KeyStore.from_file(settings.keys_file)
        self._keys_stamp: tuple[int, int, int] | None = _stamp(settings.keys_file)
        self.upstream_ok = False
        self.caps: dict[tuple[str, int], VersionCaps] = {}  # read once per version
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start the status poll and the keys watch."""
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._poll()), loop.create_task(self._watch_keys())]

    async def stop(self) -> None:
        """Stop both."""
        for task in self._tasks:
            await cancel_quietly(task)

    def upstream_ready(self) -> bool:
        """The upstream answered its last status read and every model has an AVAILABLE version."""
        return self.upstream_ok and self.router.is_ready()

    async def refresh(self, model: str) -> None:
        """Re-read one model's AVAILABLE versions on every replica (keeps the old list when none
        answers); each replica's answer also decides whether it stays in rotation."""
        try:
            versions = await self.upstreams.available_versions(model, timeout_s=1.0)
        except UpstreamError:
            self.upstream_ok = False
            return
        self.upstream_ok = True
        self.router.set_available(model, versions)
        for version in versions:
            self.metrics.version_available(model, str(version))

    async def _read_caps(self, model: str) -> None:
        """Read what each new AVAILABLE version can do from its signatures (once per version;
        a failed read is retried at the next poll, and the listing says null meanwhile)."""
        for version in self.router.models[model].available:
            if (model, version) in self.caps:
                continue
            try:
                signatures = await self.upstreams.signatures(model, version, timeout_s=1.0)
            except UpstreamError as exc:
                log.debug("cannot read signatures", model=model, version=version, error=str(exc))
                continue
            self.caps[model, version] = VersionCaps.from_signatures(signatures)

    def reload_keys(self) -> None:
        """Pick up a changed keys file (e.g. `keys add` while running); keep the old on error."""
        try:
            stamp: tuple[int, int, int] | None = _stamp(self.settings.keys_file)
        except OSError as exc:
            stamp, error = None, str(exc)
        else:
            if stamp == self._keys_stamp:
                return
            try:
                self.keys, error = KeyStore.from_file(self.settings.keys_file), ""
            except KeysFileError as exc:
                error = str(exc)
        if stamp == self._keys_stamp:
            return  # still missing: said so already
        # remember a bad version too, so it is reported once rather than at every check
        self._keys_stamp = stamp
        if error:
            log.error("cannot read keys file; keeping the loaded keys", error=error)
        else:
            log.info("keys reloaded", keys=len(self.keys))

    async def _watch_keys(self) -> None:
        # one stat() per interval: cheap enough to make a removed key stop working within 1 s
        while True:
            await asyncio.sleep(self.settings.keys_poll_interval_s)
            self.reload_keys()

    async def _poll(self) -> None:
        while True:
            try:
                self.router.reload_labels()
            except (ModelConfigError, OSError) as exc:
                log.error("cannot read model config; keeping the last labels", error=str(exc))
            for model in self.router.models:
                await self.refresh(model)
                await self._read_caps(model)
            await asyncio.sleep(self.settings.status_poll_interval_s)
