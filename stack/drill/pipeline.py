"""Drills on the sample pipeline: the gateway's spool reaching its disk cap.

The shipper is frozen (SIGSTOP), so nothing drains the spool while traffic keeps sampling into it;
with a small cap (`up --spool-cap-bytes 32768`) it fills in seconds. The spool nearly full and the
dropped samples must each reach chat; thawed (SIGCONT), the shipper drains the spool and both
resolve. Neither pages: losing samples costs analysts data, not users answers.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

from stack.drill.scenario import Expect, Log, Scenario
from stack.drill.target import DrillError, Target

SHIPPER = "shipper"
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
        cap = int(target.state.extra.get("spool_cap_bytes", 0))
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
