"""`tokenpulse shipper`: tails the spool and delivers every record once to each output.

One thread per output, each with its own checkpoint, so a slow or absent Elasticsearch never holds
back the embedded store. With `--spool-root` the shipper follows one spool directory per writer
(`<root>/<pod>`, log_pipeline.spool_root), found as they appear: each output's thread takes one
batch from each directory in turn, with a checkpoint per directory and output in
`<state>/spools/<directory>/`, and a directory whose writer is gone is deleted once every known
output shipped it, after a grace period. A checkpoint moves only after the output acknowledged (or
the record was dead-lettered), and is written atomically; killed at any point, the shipper resends
at most the last unacknowledged batch, which the stores recognise by id (SQLite by its unique key,
Elasticsearch by an id lookup across the stream's backing indices first). The main thread serves
`/metrics`, updates backlog gauges and deletes segments every known output has acknowledged: an
output with a checkpoint in the state directory is known, configured now or not, and holds its
segments until it is forgotten (`tokenpulse shipper --forget-output NAME`).
"""

from __future__ import annotations

import functools
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from prometheus_client import CollectorRegistry

from log_pipeline.checkpoint import (
    CheckpointError,
    Position,
    checkpoint_path,
    load_checkpoint,
    save_checkpoint,
)
from log_pipeline.deadletter import DeadLetters
from log_pipeline.metrics import FAIL_REASONS, ShipperMetrics
from log_pipeline.outputs import Item, ItemResult, Outcome, Output, RetryableError
from log_pipeline.reader import parse_line, read_batch, start_position
from log_pipeline.settings import ShipperSettings
from log_pipeline.spool import list_segments, read_lines, segment_name, segment_seq
from log_pipeline.spool_root import remove_directory, writer_active, writer_directories
from tokenpulse.logging import configure_logging, get_logger
from tokenpulse.threaded_http import serve_metrics

log = get_logger(__name__)
# failures that no retry fixes until someone does (a privilege, `es setup`): the output stalls
STALL_REASONS = frozenset({"config_error", "request_error"})


def record_time(timestamp: str) -> float:
    """A record's @timestamp (when the response went out) as unix seconds (now if unreadable)."""
    try:
        return _parse_time(timestamp)
    except ValueError:
        return time.time()


@functools.lru_cache(maxsize=4096)
def _parse_time(timestamp: str) -> float:
    # a busy gateway writes many records per millisecond: each distinct text is parsed once
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


@dataclass(slots=True, eq=False)
class Source:
    """One writer's spool directory, and where the checkpoints for it live."""

    key: str  # "" for --spool-dir; the subdirectory's name under --spool-root
    path: Path
    state: Path
    sealed_upto: int = 0  # segments up to this number will not grow: their writer is gone
    active: bool = True  # a writer held the directory's lock when last looked at
    gone: bool = False  # the directory vanished: dropped as soon as no batch is under way
    retired: bool = False  # being removed: no worker starts a batch from it any more


def source_state(state_dir: Path, key: str) -> Path:
    """Where the checkpoints for one writer directory live (the state directory itself for
    --spool-dir)."""
    return state_dir / "spools" / key if key else state_dir


class OutputWorker:
    """Delivers the spool's directories to one output, each from its own checkpoint."""

    def __init__(
        self,
        output: Output,
        settings: ShipperSettings,
        metrics: ShipperMetrics,
        stop: threading.Event,
    ) -> None:
        self.output = output
        self.settings = settings
        self.metrics = metrics
        self.stop = stop
        self.name = output.name
        self.deadletters = DeadLetters(
            settings.state(), self.name, settings.deadletter_segment_bytes
        )
        self.stalled = False
        self.lock = threading.Lock()  # sources, positions and current: shared with housekeeping
        self.sources: dict[str, Source] = {}
        self.positions: dict[str, Position] = {}
        self.current: str | None = None  # the directory a batch is being read or sent from
        self.thread = threading.Thread(target=self.run, name=f"ship-{self.name}", daemon=True)

    def add_source(self, source: Source) -> None:
        """Follow one more directory, from this output's checkpoint for it."""
        pos = self._initial_position(source)
        with self.lock:
            self.positions[source.key] = pos
            self.sources[source.key] = source

    def busy_with(self, key: str) -> bool:
        """Whether a batch from that directory is being read or delivered now."""
        with self.lock:
            return self.current == key

    def drop_source(self, key: str) -> None:
        """Stop following a directory (retired first, so no batch is under way)."""
        with self.lock:
            self.sources.pop(key, None)
            self.positions.pop(key, None)

    def position(self, key: str) -> Position:
        """Where this output stands in one directory."""
        with self.lock:
            return self.positions[key]

    def _initial_position(self, source: Source) -> Position:
        try:
            saved = load_checkpoint(checkpoint_path(source.state, self.name))
        except CheckpointError as exc:
            self.metrics.checkpoint_errors.labels(self.name).inc()
            log.error(
                "checkpoint unreadable; restarting at the oldest segment (resends are ignored)",
                output=self.name,
                directory=str(source.path),
                error=str(exc),
            )
            saved = None
        return saved if saved is not None else start_position(source.path)

    def run(self) -> None:
        """Read, deliver, checkpoint; until stopped."""
        while not self.stop.is_set():
            try:
                moved, failed = self.round()
            except Exception:  # noqa: BLE001 - keep shipping; the batch is re-read next time
                log.exception("shipper step failed", output=self.name)
                moved, failed = False, True
            if failed:
                self.stop.wait(self.settings.backoff_initial_s)
            elif not moved:
                self.stop.wait(self.settings.poll_interval_s)

    def round(self) -> tuple[bool, bool]:
        """One batch from each directory in turn: (anything new, any step failed)."""
        moved = failed = False
        with self.lock:
            keys = list(self.sources)
        for key in keys:
            if self.stop.is_set():
                break
            with self.lock:
                source = self.sources.get(key)
                if source is None or source.retired:
                    continue
                self.current = key
            try:
                moved |= self.step(source)
            except Exception:  # noqa: BLE001 - one directory's trouble holds back no other
                log.exception("shipper step failed", output=self.name, directory=str(source.path))
                failed = True
            finally:
                with self.lock:
                    self.current = None
        return moved, failed

    def step(self, source: Source) -> bool:
        """One batch from one directory; False when there was nothing new."""
        s = self.settings
        pos = self.position(source.key)
        batch = read_batch(source.path, pos, s.batch_records, s.batch_max_bytes, source.sealed_upto)
        if batch.malformed:
            self.metrics.malformed.inc(batch.malformed)
        if batch.skipped_segments:
            self.metrics.segments_skipped.labels(self.name).inc(batch.skipped_segments)
        if batch.end == pos:
            return False
        if batch.items and not self.deliver(batch.items):
            return True  # stopping: the checkpoint stays before this batch
        save_checkpoint(checkpoint_path(source.state, self.name), batch.end)
        with self.lock:
            self.positions[source.key] = batch.end
        return True

    def _backoff(self, attempt: int) -> None:
        s = self.settings
        self.stop.wait(min(s.backoff_max_s, s.backoff_initial_s * 2 ** min(attempt, 30)))

    def deliver(self, items: list[Item]) -> bool:
        """Send until every item is acknowledged or dead-lettered; False if stopped first."""
        out, m = self.name, self.metrics
        pending, attempt = items, 0
        while pending:
            if self.stop.is_set():
                return False
            m.batch_size.labels(out).observe(len(pending))
            try:
                results = self.output.send(pending)
            except RetryableError as exc:
                m.up.labels(out).set(0)
                m.failed.labels(out, exc.failure).inc()
                self._stall(exc.failure in STALL_REASONS, str(exc))
                log.warning("delivery failed; retrying", output=out, reason=exc.failure,
                            error=str(exc), records=len(pending), attempt=attempt)  # fmt: skip
                self._backoff(attempt)
                attempt += 1
                m.retried.labels(out).inc(len(pending))
                continue
            m.up.labels(out).set(1)
            config = next((r.reason for r in results if r.failure in STALL_REASONS), "")
            self._stall(bool(config), config)
            pending = self._settle(pending, results)
            if pending:
                self._backoff(attempt)
                attempt += 1
                m.retried.labels(out).inc(len(pending))
        return True

    def _stall(self, stalled: bool, reason: str) -> None:
        """Report (and log once) an output waiting on a configuration error, or its end."""
        if stalled != self.stalled:
            if stalled:
                log.error("output stalled on a configuration error; records wait in the spool "
                          "until it is fixed (privileges, `tokenpulse es setup`)",
                          output=self.name, error=reason)  # fmt: skip
            else:
                log.info("output no longer stalled", output=self.name)
            self.stalled = stalled
            self.metrics.stalled.labels(self.name).set(int(stalled))

    def _settle(self, items: list[Item], results: list[ItemResult]) -> list[Item]:
        out, m = self.name, self.metrics
        now = time.time()
        retry: list[Item] = []
        dead: list[tuple[Item, str]] = []
        delivered = duplicates = 0
        observe = m.delay.labels(out).observe  # one label lookup per batch, not per record
        for item, res in zip(items, results, strict=True):
            if res.outcome is Outcome.OK or res.outcome is Outcome.DUPLICATE:
                delivered += 1
                duplicates += res.outcome is Outcome.DUPLICATE
                observe(max(0.0, now - record_time(item.timestamp)))
            elif res.outcome is Outcome.RETRY:
                m.failed.labels(out, res.failure or "server_error").inc()
                retry.append(item)
            else:
                m.failed.labels(
                    out, res.failure if res.failure in FAIL_REASONS else "permanent"
                ).inc()
                dead.append((item, res.reason))
        if delivered:
            m.shipped.labels(out).inc(delivered)
        if duplicates:
            m.duplicates.labels(out).inc(duplicates)
        if dead:
            self.deadletters.write(dead)
            m.dead_lettered.labels(out).inc(len(dead))
            log.error("records dead-lettered", output=out, records=len(dead),
                      first_reason=dead[0][1], file=str(self.deadletters.path))  # fmt: skip
        if retry:
            log.warning("records to retry", output=out, records=len(retry),
                        reason=results[items.index(retry[0])].reason)  # fmt: skip
        return retry


def backlog(spool_dir: Path, pos: Position) -> tuple[int, float]:
    """Bytes after `pos` and the age in seconds of the first record there (0 when caught up)."""
    total, oldest = 0, 0.0
    for path in list_segments(spool_dir):
        seq = segment_seq(path)
        if seq < pos.seq:
            continue
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        start = pos.offset if seq == pos.seq else 0
        total += max(0, size - start)
        if not oldest and size > start:
            for line in read_lines(path, start, final=False, max_bytes=65536):
                item = parse_line(getattr(line, "data", b""))
                if item is not None:
                    oldest = max(0.0, time.time() - record_time(item.timestamp))
                    break
    return total, oldest


def checkpoint_dirs(settings: ShipperSettings) -> dict[str, Path]:
    """Directory key -> where its checkpoints are: the state directory itself for --spool-dir,
    `<state>/spools/<directory>` for each writer directory seen under --spool-root."""
    state = settings.state()
    if settings.spool_root is None:
        return {"": state}
    spools = state / "spools"
    try:
        return {p.name: p for p in sorted(spools.iterdir()) if p.is_dir()}
    except FileNotFoundError:
        return {}


def _checkpoint_names(directory: Path) -> set[str]:
    prefix, suffix = "checkpoint-", ".json"
    return {p.name[len(prefix) : -len(suffix)] for p in directory.glob(f"{prefix}*{suffix}")}


def known_outputs(settings: ShipperSettings) -> list[str]:
    """Outputs with a checkpoint in the state directory, for any writer directory (configured
    now or not)."""
    names: set[str] = set()
    for directory in checkpoint_dirs(settings).values():
        names |= _checkpoint_names(directory)
    return sorted(names)


class ForgetError(Exception):
    """An output cannot be forgotten (it is still configured, or unknown)."""


def forget_output(settings: ShipperSettings, name: str) -> dict[str, Position | None]:
    """Drop an unconfigured output's checkpoints, so its segments are no longer held; the position
    it had reached in each directory (None: unreadable). Its dead letters stay."""
    if name in settings.outputs:
        raise ForgetError(f"output {name} is configured (--outputs); remove it there first")
    reached: dict[str, Position | None] = {}
    for key, directory in checkpoint_dirs(settings).items():
        path = checkpoint_path(directory, name)
        if not path.exists():
            continue
        try:
            reached[key] = load_checkpoint(path)
        except CheckpointError:
            reached[key] = None
        path.unlink()
    if not reached:
        known = ", ".join(known_outputs(settings)) or "none"
        raise ForgetError(f"no known output {name} in {settings.state()} (known: {known})")
    positions = {key or "spool": str(pos) for key, pos in reached.items()}
    log.warning("output forgotten: segments it had not shipped are no longer kept for it",
                output=name, positions=positions)  # fmt: skip
    return reached


def collect_garbage(spool_dir: Path, positions: list[Position]) -> int:
    """Delete segments every output has moved past; the number deleted."""
    if not positions:
        return 0
    low = min(p.seq for p in positions)
    deleted = 0
    for path in list_segments(spool_dir):
        if segment_seq(path) >= low:
            break
        path.unlink(missing_ok=True)
        deleted += 1
    return deleted


def build_outputs(settings: ShipperSettings) -> list[Output]:
    """The configured outputs (Elasticsearch imported only when used)."""
    outputs: list[Output] = []
    for name in settings.outputs:
        if name == "sqlite":
            from log_pipeline.outputs.sqlite import SqliteOutput

            outputs.append(SqliteOutput(settings.sqlite_path, settings.sqlite_retention_days))
        else:
            from log_pipeline.outputs.elasticsearch import ElasticsearchOutput, make_client

            client = make_client(settings.es_url, settings.es_auth(), settings.es_timeout_s)
            outputs.append(ElasticsearchOutput(client, settings.es_data_stream))
    return outputs


class Shipper:
    """All output workers plus housekeeping; `run()` blocks until `stop` is set."""

    def __init__(
        self,
        settings: ShipperSettings,
        outputs: list[Output] | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry or CollectorRegistry(auto_describe=False)
        self.outputs = outputs if outputs is not None else build_outputs(settings)
        self.metrics = ShipperMetrics(self.registry, tuple(o.name for o in self.outputs))
        self.stop = threading.Event()
        self.drain_deadline: float | None = None  # set by request_stop() when draining
        self.root = settings.spool_root
        (self.root or settings.spool_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
        self.workers = [OutputWorker(o, settings, self.metrics, self.stop) for o in self.outputs]
        self.sources: dict[str, Source] = {}
        self.drained_since: dict[str, float] = {}  # directory -> when first seen removable
        if self.root is None:
            self._add(Source("", settings.spool_dir, settings.state()))
        else:
            self.discover()
        configured = {o.name for o in self.outputs}
        self.held = [n for n in known_outputs(settings) if n not in configured]
        for name in self.held:
            log.warning("output not configured but known: its checkpoint holds the spool segments "
                        "it has not shipped (`tokenpulse shipper --forget-output` releases them)",
                        output=name)  # fmt: skip

    def _add(self, source: Source) -> None:
        for w in self.workers:
            w.add_source(source)
        self.sources[source.key] = source
        self.metrics.directories.set(len(self.sources))

    def discover(self) -> None:
        """Follow new writer directories under the root, drop vanished ones, and seal the
        segments of those without a writer."""
        assert self.root is not None
        state = self.settings.state()
        found = writer_directories(self.root, exclude=state)
        for key, path in found.items():
            if key not in self.sources:
                self._add(Source(key, path, source_state(state, key)))
                log.info("writer directory found", directory=str(path))
        for key in [k for k in self.sources if k not in found]:
            self.sources[key].gone = True
            if self._retire(self.sources[key]):
                log.warning("writer directory vanished; its checkpoints are dropped",
                            directory=str(self.root / key))  # fmt: skip
        for source in [s for s in self.sources.values() if not s.gone]:
            # list first, then look at the lock: a writer that starts after the listing opens a
            # newer segment than any listed, so the listed ones are sealed if nobody holds it
            segments = list_segments(source.path)
            source.active = writer_active(source.path)
            if not source.active and segments:
                source.sealed_upto = segment_seq(segments[-1])

    def _retire(self, source: Source) -> bool:
        """Stop every worker reading a directory and forget its checkpoints; False while a batch
        from it is still under way (try again later)."""
        source.retired = True
        if any(w.busy_with(source.key) for w in self.workers):
            return False
        for w in self.workers:
            w.drop_source(source.key)
        del self.sources[source.key]
        self.metrics.directories.set(len(self.sources))
        self.drained_since.pop(source.key, None)
        shutil.rmtree(source.state, ignore_errors=True)
        return True

    def held_positions(self, source: Source, known: set[str]) -> dict[str, Position]:
        """Where each known, unconfigured output stopped in a directory (an unreadable checkpoint
        holds all, and so does none at all for a directory the output has never seen)."""
        out = {}
        for name in self.held:
            try:
                pos = load_checkpoint(checkpoint_path(source.state, name))
            except CheckpointError:
                pos = Position(0, 0)
            if pos is None:
                if name not in known:  # forgotten meanwhile: released
                    continue
                pos = Position(0, 0)
            out[name] = pos
        return out

    def housekeeping(self) -> None:
        """Find directories, set the backlog gauges, delete shipped segments and drained
        directories."""
        if self.root is not None:
            self.discover()
        known = set(known_outputs(self.settings)) if self.held else set()
        names = [w.name for w in self.workers] + list(self.held)
        size = dict.fromkeys(names, 0)
        age = dict.fromkeys(names, 0.0)
        behind = dict.fromkeys(names, 0)
        for source in [s for s in self.sources.values() if not s.gone]:
            positions = {w.name: w.position(source.key) for w in self.workers}
            positions |= self.held_positions(source, known)
            pending = 0
            for name, pos in positions.items():
                left, oldest = backlog(source.path, pos)
                size[name] += left
                age[name] = max(age[name], oldest)
                behind[name] += left > 0
                pending += left
            deleted = collect_garbage(source.path, list(positions.values()))
            if deleted:
                self.metrics.segments_deleted.inc(deleted)
            if self.root is not None:
                self._remove_if_drained(source, positions, drained=pending == 0)
        for name in names:
            self.metrics.backlog.labels(name).set(size[name])
            self.metrics.oldest_age.labels(name).set(age[name])
            self.metrics.directories_behind.labels(name).set(behind[name])

    def _remove_if_drained(
        self, source: Source, positions: dict[str, Position], drained: bool
    ) -> None:
        """Delete a directory with no writer once every known output shipped it, for the grace
        period. Not while an unconfigured output is known: its checkpoints keep it known."""
        if source.active or not drained or self.held:
            self.drained_since.pop(source.key, None)
            source.retired = False
            return
        now = time.monotonic()
        since = self.drained_since.setdefault(source.key, now)
        if now - since < self.settings.spool_dir_remove_after_s:
            return
        source.retired = True  # no new batch from it; then wait for one under way to finish
        if any(w.busy_with(source.key) for w in self.workers):
            return

        def still_drained() -> bool:  # checked holding the writer lock: no writer can start
            return all(backlog(source.path, p)[0] == 0 for p in positions.values())

        if not remove_directory(source.path, still_drained):
            source.retired = False
            self.drained_since.pop(source.key, None)
            return
        self._retire(source)
        self.metrics.directories_removed.inc()
        grace = self.settings.spool_dir_remove_after_s
        log.info("writer directory removed: no writer, every record shipped",
                 directory=str(source.path), grace_s=grace)  # fmt: skip

    def request_stop(self) -> None:
        """SIGTERM: stop at once, or with `drain_timeout_s` ship what the spool holds first (for
        a spool on a volume that dies with the pod: an emptyDir shared with the gateway)."""
        if self.settings.drain_timeout_s <= 0 or self.drain_deadline is not None:
            self.stop.set()
            return
        if any(writer_active(s.path) for s in list(self.sources.values())):
            # stopped alone (a restart): the writer and the spool stay, nothing to drain
            log.info("a writer still holds the spool; stopping without a drain")
            self.stop.set()
            return
        self.drain_deadline = time.monotonic() + self.settings.drain_timeout_s
        log.info("draining the spool before exit", timeout_s=self.settings.drain_timeout_s)

    def drained(self) -> bool:
        """Whether every directory's writer is gone and every output shipped all it wrote; seals
        the segments of a directory whose writer is gone (its torn last line is then skipped)."""
        done = True
        for source in list(self.sources.values()):
            segments = list_segments(source.path)
            if writer_active(source.path):  # the writer's lock, on this pod's own volume
                done = False
                continue
            if segments:
                source.sealed_upto = segment_seq(segments[-1])
            for w in self.workers:
                if backlog(source.path, w.position(source.key))[0]:
                    done = False
        return done

    def _drain_step(self) -> None:
        assert self.drain_deadline is not None
        if self.drained():
            log.info("spool drained: every record shipped")
            self.stop.set()
        elif time.monotonic() >= self.drain_deadline:
            left = {w.name: sum(backlog(s.path, w.position(s.key))[0]
                                for s in self.sources.values()) for w in self.workers}  # fmt: skip
            log.error("spool not drained before the drain timeout; unshipped bytes are left "
                      "behind", unshipped_bytes=left,
                      timeout_s=self.settings.drain_timeout_s)  # fmt: skip
            self.stop.set()

    def run(self) -> None:
        """Start the workers and keep house until stopped, then wait for them."""
        for w in self.workers:
            w.thread.start()
        try:
            while not self.stop.wait(0.1 if self.drain_deadline is not None else 1.0):
                try:
                    self.housekeeping()
                    if self.drain_deadline is not None:
                        self._drain_step()
                except OSError:
                    log.exception("shipper housekeeping failed")
        finally:
            self.stop.set()
            for w in self.workers:
                w.thread.join(self.settings.backoff_max_s + self.settings.es_timeout_s)
                w.output.close()


def run(settings: ShipperSettings) -> int:
    """Serve /metrics and ship until SIGTERM/SIGINT."""
    configure_logging("shipper", settings.log_level)
    shipper = Shipper(settings)
    server = serve_metrics(settings.metrics_host, settings.metrics_port, shipper.registry)
    port = server.server_address[1]
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: shipper.request_stop())
    spool = settings.spool_root or settings.spool_dir
    log.info("shipper started", outputs=settings.outputs, metrics_port=port,
             **{"spool_root" if settings.spool_root else "spool_dir": str(spool)})  # fmt: skip
    shipper.run()
    server.shutdown()
    log.info("shipper stopped")
    return 0


__all__ = [
    "ForgetError", "Shipper", "Source", "backlog", "checkpoint_dirs", "collect_garbage",
    "forget_output", "known_outputs", "run", "segment_name",
]  # fmt: skip
