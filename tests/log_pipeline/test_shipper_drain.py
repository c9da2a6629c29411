"""A shipper whose spool dies with its pod (an emptyDir shared with the gateway, the shipper a
native sidecar that Kubernetes stops after the gateway) ships what the spool holds on SIGTERM,
within its drain bound, instead of leaving it on a volume about to be deleted."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from devtools.standins.es import EsStandin
from tests.log_pipeline.conftest import make_sample, write_samples
from tests.log_pipeline.support import PATTERN, STREAM, request_ids, wait_until
from tokenpulse.procs import free_port, stop_process

TOTAL = 300


def _start(spool: Path, es_url: str, log: Path, drain_s: float) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPULSE_SHIPPER_")}
    cmd = [sys.executable, "-m", "stack.cli", "shipper", "--spool-dir", str(spool),
           "--outputs", "elasticsearch", "--es-url", es_url, "--batch-records", "5",
           "--poll-interval-s", "0.02", "--backoff-initial-s", "0.05", "--backoff-max-s", "0.2",
           "--drain-timeout-s", str(drain_s), "--metrics-port", "0"]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log.open("ab"))


def test_sigterm_ships_everything_the_spool_holds_before_exit(tmp_path: Path) -> None:
    spool, log = tmp_path / "spool", tmp_path / "shipper.log"
    # the gateway's writer has exited (Kubernetes stops a native sidecar after the app)
    write_samples(spool, [make_sample(i) for i in range(TOTAL)])
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        es.faults.delay_s = 0.02  # 60 bulk requests: over a second to ship it all
        proc = _start(spool, es.url, log, drain_s=60)
        try:
            wait_until(lambda: len(es.docs(STREAM)) > 0, "the first batch shipped")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0
        finally:
            stop_process(proc)
        shipped = request_ids(es.docs(STREAM).values())
    assert shipped == sorted(f"req-{i}" for i in range(TOTAL)), f"{len(shipped)} of {TOTAL}"
    text = log.read_text()
    assert "spool drained" in text and "Traceback" not in text


def test_the_drain_ends_at_its_bound_when_the_store_is_down(tmp_path: Path) -> None:
    spool, log = tmp_path / "spool", tmp_path / "shipper.log"
    write_samples(spool, [make_sample(i) for i in range(20)])
    proc = _start(spool, f"http://127.0.0.1:{free_port()}", log, drain_s=1.5)  # nobody there
    try:
        wait_until(lambda: "shipper started" in log.read_text(), "the shipper started")
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        took = time.monotonic() - began
    finally:
        stop_process(proc)
    assert took >= 1.4, took  # it tried for its whole bound (the upper bound is the wait above)
    text = log.read_text()
    assert "spool not drained before the drain timeout" in text and "Traceback" not in text


def test_a_shipper_stopped_alone_leaves_the_spool_to_its_running_writer(tmp_path: Path) -> None:
    """Its sidecar restarted while the gateway runs: the spool stays, so no drain is due."""
    spool, log = tmp_path / "spool", tmp_path / "shipper.log"
    write_samples(spool, [make_sample(i) for i in range(20)])
    lock = os.open(spool / "writer.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)  # a writer holds it, as log_pipeline.sidecar does
    # a drain would spend its whole bound on the dead store: 120 s, far past the 60 s allowed
    proc = _start(spool, f"http://127.0.0.1:{free_port()}", log, drain_s=120)
    try:
        wait_until(lambda: "shipper started" in log.read_text(), "the shipper started")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        stop_process(proc)
        os.close(lock)
    text = log.read_text()
    assert "stopping without a drain" in text and "Traceback" not in text
