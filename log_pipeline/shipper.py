"""`tokenpulse shipper`: tails the spool and delivers every record once to each output.

One thread per output, each with its own checkpoint, so a slow or absent Elasticsearch never holds
back the embedded store. A checkpoint moves only after the output acknowledged (or the record was
dead-lettered), and is written atomically; killed at any point, the shipper resends at most the
last unacknowledged batch, which the stores recognise by id (SQLite by its unique key,
Elasticsearch by an id lookup across the stream's backing indices first). The main thread serves
`/metrics`, updates backlog gauges and deletes segments every known output has acknowledged: an
output with a checkpoint in the state directory is known, configured now or not, and holds its
segments until it is forgotten (`tokenpulse shipper --forget-output NAME`).
"""

from __future__ import annotations

import functools
import signal
import threading
import time
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


class OutputWorker:
    """Delivers the spool to one output from its checkpoint."""

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
        state = settings.state()
        self.checkpoint_file = checkpoint_path(state, self.name)
        self.deadletters = DeadLetters(state, self.name, settings.deadletter_segment_bytes)
        self.position = self._initial_position()
        self.stalled = False
        self.thread = threading.Thread(target=self.run, name=f"ship-{self.name}", daemon=True)

    def _initial_position(self) -> Position:
        try:
            saved = load_checkpoint(self.checkpoint_file)
        except CheckpointError as exc:
            self.metrics.checkpoint_errors.labels(self.name).inc()
            log.error(
                "checkpoint unreadable; restarting at the oldest segment (resends are ignored)",
                output=self.name,
                error=str(exc),
            )
            saved = None
        return saved if saved is not None else start_position(self.settings.spool_dir)

    def run(self) -> None:
        """Read, deliver, checkpoint; until stopped."""
        while not self.stop.is_set():
            try:
                if not self.step():
                    self.stop.wait(self.settings.poll_interval_s)
            except Exception:  # noqa: BLE001 - keep shipping; the batch is re-read next time
                log.exception("shipper step failed", output=self.name)
                self.stop.wait(self.settings.backoff_initial_s)

    def step(self) -> bool:
        """One batch; False when there was nothing new."""
        s = self.settings
        batch = read_batch(s.spool_dir, self.position, s.batch_records, s.batch_max_bytes)
        if batch.malformed:
            self.metrics.malformed.inc(batch.malformed)
        if batch.skipped_segments:
            self.metrics.segments_skipped.labels(self.name).inc(batch.skipped_segments)
        if batch.end == self.position:
            return False
        if batch.items and not self.deliver(batch.items):
            return True  # stopping: the checkpoint stays before this batch
        save_checkpoint(self.checkpoint_file, batch.end)
        self.position = batch.end
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


def known_outputs(state_dir: Path) -> list[str]:
    """Outputs with a checkpoint in the state directory (configured now or not)."""
    prefix, suffix = "checkpoint-", ".json"
    return sorted(p.name[len(prefix) : -len(suffix)] for p in state_dir.glob(f"{prefix}*{suffix}"))


class ForgetError(Exception):
    """An output cannot be forgotten (it is still configured, or unknown)."""


def forget_output(settings: ShipperSettings, name: str) -> Position | None:
    """Drop an unconfigured output's checkpoint, so its segments are no longer held; the position
    it had reached. Its dead letters stay."""
    if name in settings.outputs:
        raise ForgetError(f"output {name} is configured (--outputs); remove it there first")
    path = checkpoint_path(settings.state(), name)
    if not path.exists():
        known = ", ".join(known_outputs(settings.state())) or "none"
        raise ForgetError(f"no known output {name} in {settings.state()} (known: {known})")
    try:
        pos = load_checkpoint(path)
    except CheckpointError:
        pos = None
    path.unlink()
    log.warning("output forgotten: segments it had not shipped are no longer kept for it",
                output=name, position=str(pos))  # fmt: skip
    return pos


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
        settings.spool_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.workers = [OutputWorker(o, settings, self.metrics, self.stop) for o in self.outputs]
        configured = {o.name for o in self.outputs}
        self.held = [n for n in known_outputs(settings.state()) if n not in configured]
        for name in self.held:
            log.warning("output not configured but known: its checkpoint holds the spool segments "
                        "it has not shipped (`tokenpulse shipper --forget-output` releases them)",
                        output=name)  # fmt: skip

    def held_positions(self) -> dict[str, Position]:
        """Where each known, unconfigured output stopped (an unreadable checkpoint holds all)."""
        out = {}
        for name in self.held:
            try:
                pos = load_checkpoint(checkpoint_path(self.settings.state(), name))
            except CheckpointError:
                pos = Position(0, 0)
            if pos is not None:  # forgotten meanwhile: released
                out[name] = pos
        return out

    def housekeeping(self) -> None:
        """Backlog gauges and segment deletion."""
        positions = {w.name: w.position for w in self.workers} | self.held_positions()
        for name, pos in positions.items():
            size, age = backlog(self.settings.spool_dir, pos)
            self.metrics.backlog.labels(name).set(size)
            self.metrics.oldest_age.labels(name).set(age)
        deleted = collect_garbage(self.settings.spool_dir, list(positions.values()))
        if deleted:
            self.metrics.segments_deleted.inc(deleted)

    def run(self) -> None:
        """Start the workers and keep house until stopped, then wait for them."""
        for w in self.workers:
            w.thread.start()
        try:
            while not self.stop.wait(1.0):
                try:
                    self.housekeeping()
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
        signal.signal(sig, lambda *_: shipper.stop.set())
    log.info("shipper started", outputs=settings.outputs, spool_dir=str(settings.spool_dir),
             metrics_port=port)  # fmt: skip
    shipper.run()
    server.shutdown()
    log.info("shipper stopped")
    return 0


__all__ = [
    "ForgetError", "Shipper", "backlog", "collect_garbage", "forget_output", "known_outputs",
    "run", "segment_name",
]  # fmt: skip
