"""Drills on the sample pipeline: the gateway's spool reaching its disk cap, Elasticsearch gone.

Spool disk cap: the shipper is frozen (SIGSTOP), so nothing drains the spool while traffic keeps
sampling into it; with a small cap (`up --spool-cap-bytes 32768`) it fills in seconds. The spool
nearly full and the dropped samples must each reach chat; thawed (SIGCONT), the shipper drains the
spool and both resolve.

Elasticsearch unreachable: the fault proxy between the shipper and Elasticsearch (`up
--es-fault-proxy-port`) stops listening (SIGUSR1), so the shipper's connections are refused as
from a host that is gone, while SQLite keeps taking every sample. The Elasticsearch output's
oldest unshipped record ages past the backlog threshold and the alert reaches chat; back
(SIGUSR2), the shipper catches up, the alert resolves, and every sample SQLite stored meanwhile is
in Elasticsearch exactly once, with nothing dropped, skipped or dead-lettered.

Neither pages: losing or delaying samples costs analysts data, not users answers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections.abc import Iterator

from stack.drill.scenario import Expect, Log, Scenario
from stack.drill.stores import Elasticsearch, loss_counters, sqlite_last_row, sqlite_since
from stack.drill.target import DrillError, Target, wait_for

SHIPPER = "shipper"
ES_PROXY = "esfaultproxy"
BACKLOG_ALERT = "TokenPulseShipperBacklogOld"
MAX_CAP_BYTES = 1 << 20  # above this the spool would take minutes to fill at drill rates


class SpoolDiskCap(Scenario):
    """The spool fills to its cap while the shipper is stopped: chat says so, then drops."""

    name = "spool-disk-cap"
    summary = "freeze the shipper (SIGSTOP) under 8 req/s until the small spool cap is hit"
    expect = (
        Expect("TokenPulsePipelineSpoolNearlyFull", receiver="chat"),
        Expect("TokenPulsePipelineSamplesDropped", receiver="chat"),
    )
    # 1 req/s all along, 7 more only while the shipper is stopped: at 8 req/s a 32 KiB spool
    # overflows even while shipped, and with no traffic at all its last segment never rotates
    # (rotation happens on a write), so the spool never shrinks and the alert never resolves
    rps = 1.0
    fault_rps = 7.0
    fire_within_s = 120.0

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        cap = target.state.config.spool_cap_bytes
        if not 0 < cap <= MAX_CAP_BYTES:
            raise DrillError(
                f"the spool cap is {cap or 'the default 1 GiB'}: start up with "
                "--spool-cap-bytes 32768 to drill it"
            )
        pid = target.signal(SHIPPER, signal.SIGSTOP)
        log.mark("shipper_stopped")
        try:
            with target.traffic(self.fault_rps) as traffic:
                yield
            if traffic.failures():
                log.problems.append(f"{traffic.failures()} of {len(traffic.codes)} requests failed")
        finally:
            os.kill(pid, signal.SIGCONT)
            log.mark("shipper_resumed")


def refused(port: int) -> bool:
    """Whether 127.0.0.1:`port` refuses a connection now (nothing listens there)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2.0).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return False  # a timeout or the like: not the clean refusal of a host that is gone
    return False


class EsUnreachable(Scenario):
    """Elasticsearch refuses connections until the backlog alert reaches chat; then it is back,
    the alert resolves and not one sample is lost or stored twice."""

    name = "es-unreachable"
    summary = "the shipper's Elasticsearch refuses connections (its fault proxy down), then is back"
    expect = (Expect(BACKLOG_ALERT, receiver="chat"),)
    # The samples SQLite stores while Elasticsearch is away are the proof, and the spool holds
    # each until Elasticsearch has it too. So every drill request must be a sample: it goes to
    # the canary label, which the sampling rules always keep (`canary_labels`). Left to head
    # sampling (10 %), a fresh clone's `up` stored 1 of 23 requests, too few for a backlog to
    # age into the alert within the bound. ~1.3 KB each: the drill stack's 32 KiB spool cap holds
    # ~25, which 1 req/s overflows within the ~30 s the alert takes. One every 4 s stores ~8
    # while Elasticsearch is away and keeps the spool under its nearly-full mark.
    rps = 0.25
    label = "canary"
    quiet_s = 120.0  # a backlog alert left by an earlier fault (a frozen shipper) resolves first
    switch_s = 10.0  # the proxy refuses (or accepts again) within this after its signal
    drain_s = 60.0  # after the alert resolved, Elasticsearch holds every sample within this

    def __init__(self) -> None:
        self.first_row = 0  # the embedded store's newest row before the fault
        self.counters: dict[str, float] = {}
        self.down_at = self.back_at = 0.0

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        es = Elasticsearch(target)  # DrillError when the stack runs without Elasticsearch
        port = target.state.config.es_fault_proxy_port
        if not port:
            raise DrillError("the shipper reaches Elasticsearch directly: start up with "
                             "--es-fault-proxy-port to drill it")  # fmt: skip
        es.call(f"/{es.stream}/_refresh")  # reachable, and the samples' stream is there
        if wait_for(lambda: not self._backlog_alert(target), self.quiet_s, every_s=1.0) is False:
            raise DrillError(f"{BACKLOG_ALERT} still fires {self.quiet_s:g} s after the last fault")
        self.first_row = sqlite_last_row(target)
        self.counters = loss_counters(target)
        pid = target.signal(ES_PROXY, signal.SIGUSR1)
        self.down_at = time.time()
        if not wait_for(lambda: refused(port), self.switch_s):
            log.problems.append(f"the ES fault proxy still accepts connections on {port}")
        log.mark("es_down")
        try:
            yield
        finally:
            os.kill(pid, signal.SIGUSR2)
            self.back_at = time.time()
            if wait_for(lambda: not refused(port), self.switch_s) is False:
                log.problems.append(f"the ES fault proxy refuses connections on {port} still")
            log.mark("es_back")

    @staticmethod
    def _backlog_alert(target: Target) -> bool:
        return any(a["alertname"] == BACKLOG_ALERT for a in target.firing(pending=True))

    def check(self, target: Target, log: Log) -> None:
        es = Elasticsearch(target)
        stored = sqlite_since(target, self.first_row)
        ids = [s.id for s in stored]
        while_down = sum(self.down_at <= s.at <= self.back_at for s in stored)
        if not while_down:
            log.problems.append("no sample was stored while Elasticsearch was away: no proof")

        def complete() -> bool:
            held = es.copies(ids)
            return all(held[i] for i in ids)

        wait_for(complete, self.drain_s, every_s=2.0)
        held = es.copies(ids)
        missing = [i for i in ids if not held[i]]
        twice = [i for i in ids if held[i] > 1]
        if missing:
            log.problems.append(f"{len(missing)} of {len(ids)} samples SQLite stored are not in "
                                f"Elasticsearch (e.g. {missing[0]})")  # fmt: skip
        if twice:
            log.problems.append(f"{len(twice)} samples are in Elasticsearch more than once "
                                f"(e.g. {twice[0]}: {held[twice[0]]} copies)")  # fmt: skip
        after = loss_counters(target)
        for name, value in after.items():
            if value != self.counters.get(name, 0.0):
                log.problems.append(f"{name} rose by {value - self.counters.get(name, 0.0):g}")
        log.remarks.append(
            f"{len(ids)} samples stored in SQLite during the drill ({while_down} while "
            f"Elasticsearch was away): {len(ids) - len(missing) - len(twice)} in Elasticsearch "
            "exactly once"
        )
