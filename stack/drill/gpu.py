"""Drills on the GPUs, through the fake NVML backend's fault file.

`tokenpulse up --gpu-backend fake` runs the exporter on simulated GPUs that read drill faults from
RUN_DIR/gpu-faults.json (exporter/nvml/fake_faults.py; stack.json names the file). The drill
writes its faults there and clears them afterwards, as a real node would report them through
NVML: an XID event from the driver, clocks held down by heat. Real GPUs read no such file, so the
drill needs the fake backend.
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stack.drill.scenario import Expect, Log, Scenario
from stack.drill.target import DrillError, Target
from tokenpulse.atomic import atomic_write

XID_GPU = 0
# a double-bit ECC error: in the rule's GPU_CRITICAL_XIDS and the runbook's "uncorrectable memory
# errors"; 79 (fallen off the bus) would leave a lost GPU behind, which this drill does not fake
XID = 48
THROTTLED_GPU = 1


def faults_file(target: Target) -> Path:
    """The fault file of the stack's fake GPUs; DrillError when it runs none."""
    path = target.state.config.gpu_faults_file
    if path is None:
        raise DrillError(
            "the stack runs no fake GPUs to drill: start up with --gpu-backend fake "
            f"(it runs --gpu-backend {target.state.config.gpu_backend})"
        )
    return path


def write_faults(path: Path, faults: dict[str, Any]) -> None:
    """Replace the fault file in one step (the exporter never reads half a file)."""
    atomic_write(path, json.dumps(faults) + "\n")


class GpuXidAndThrottle(Scenario):
    """One GPU reports a critical XID, another is held down by heat: the XID pages, the heat
    reaches chat, and both resolve once the faults are gone."""

    name = "gpu-xid-and-throttle"
    summary = f"XID {XID} on GPU {XID_GPU}, thermal throttling on GPU {THROTTLED_GPU} (fake GPUs)"
    expect = (
        Expect("TokenPulseGpuCriticalXid"),
        Expect("TokenPulseGpuThrottled", receiver="chat"),
    )
    rps = 1.0  # the GPUs' faults do not depend on traffic
    fire_within_s = 60.0
    resolve_within_s = 60.0
    # The compressed rule fires while the XID is under 10 s old, after a `for` floored at 5 s:
    # one event fires ~2 s, less than group_wait (5 s), and Alertmanager never sends a group
    # whose alerts all resolved before its first flush. So the GPU keeps reporting the XID
    # (as one with a bad memory row does while a job keeps touching it) while the fault is on;
    # the uncompressed rule (10 min window, 1 min `for`) pages on a single event.
    xid_every_s = 3.0

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        path = faults_file(target)
        run = uuid.uuid4().hex[:8]
        xids: list[dict[str, Any]] = []
        stop = threading.Event()
        lock = threading.Lock()

        def report_xid() -> None:
            with lock:
                xids.append({"id": f"drill-{run}-{len(xids)}", "gpu": XID_GPU, "xid": XID})
                write_faults(path, {"xids": xids, "thermal_throttle": [THROTTLED_GPU]})

        def repeat() -> None:
            while not stop.wait(self.xid_every_s):
                report_xid()

        report_xid()
        log.mark("faults_written")
        thread = threading.Thread(target=repeat, name="drill-xids", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            write_faults(path, {})
            log.mark("faults_cleared")
            log.remarks.append(f"XID {XID} reported {len(xids)} times")

    def check(self, target: Target, log: Log) -> None:
        """The pages name the GPU that has the fault."""
        wanted = {
            "TokenPulseGpuCriticalXid": {"gpu": str(XID_GPU), "xid": str(XID)},
            "TokenPulseGpuThrottled": {"gpu": str(THROTTLED_GPU)},
        }
        for note in target.notes():
            want = wanted.get(note.alertname)
            if note.at < log.started or note.status != "firing" or want is None:
                continue
            got = {k: note.labels.get(k, "") for k in want}
            if got != want:
                log.problems.append(f"{note.alertname} names {got}, not the faulty GPU {want}")
