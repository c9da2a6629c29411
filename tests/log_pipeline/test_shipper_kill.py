"""The shipper process is SIGKILLed five times at random points: no loss, no duplicate."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from devtools.standins.es import EsStandin
from tests.log_pipeline.conftest import make_sample, write_samples
from tests.log_pipeline.support import (
    PATTERN,
    STREAM,
    request_ids,
    sqlite_docs,
    sqlite_ids,
    wait_until,
)
from tokenpulse.procs import free_port, stop_process

TOTAL = 250
CHUNK = 40


def _start(
    spool: Path, db: Path, es_url: str, log: Path, metrics_port: int = 0
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPULSE_SHIPPER_")}
    cmd = [sys.executable, "-m", "stack.cli", "shipper", "--spool-dir", str(spool),
           "--outputs", "sqlite", "elasticsearch", "--es-url", es_url, "--sqlite-path", str(db),
           "--batch-records", "7", "--poll-interval-s", "0.02", "--backoff-initial-s", "0.01",
           "--backoff-max-s", "0.2", "--metrics-port", str(metrics_port)]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log.open("ab"))


@pytest.mark.slow
def test_sigkill_five_times_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    rng = random.Random(20261201)
    spool, db, log = tmp_path / "spool", tmp_path / "samples.db", tmp_path / "shipper.log"
    expected = sorted(f"req-{i}" for i in range(TOTAL))
    written = 0
    port = free_port()
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        es.faults.delay_s = 0.005  # bulk requests in flight long enough to be killed inside
        proc = _start(spool, db, es.url, log)
        try:
            for kill in range(5):
                write_samples(spool, [make_sample(i) for i in range(written, written + CHUNK)])
                written += CHUNK
                before = len(sqlite_ids(db)) + len(es.docs(STREAM))

                def progressed(before: int = before) -> bool:
                    return len(sqlite_ids(db)) + len(es.docs(STREAM)) > before

                wait_until(progressed, f"progress before kill {kill}")
                time.sleep(rng.uniform(0.0, 0.15))
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
                proc = _start(spool, db, es.url, log, metrics_port=port if kill == 4 else 0)
            write_samples(spool, [make_sample(i) for i in range(written, TOTAL)])
            wait_until(lambda: len(sqlite_ids(db)) == TOTAL and len(es.docs(STREAM)) == TOTAL,
                       "every record in both stores", timeout_s=120)  # fmt: skip
            page = httpx.get(f"http://127.0.0.1:{port}/metrics").text  # the last run's own page
            assert 'tokenpulse_shipper_output_up{output="elasticsearch"} 1.0' in page
        finally:
            stop_process(proc)
        assert request_ids(sqlite_docs(db)) == expected
        assert request_ids(es.docs(STREAM).values()) == expected and es.created == TOTAL
        resent = sum(es.item_attempts.values()) - TOTAL
    assert "Traceback" not in log.read_text()
    print(f"records resent after kills (answered 409, harmless): {resent}")
