"""The shipper over a spool root: one directory per writer (a Kubernetes pod each), every one
shipped once to each output, found as they appear, drained ones removed once their writer is gone.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from devtools.standins.es import EsStandin
from log_pipeline.checkpoint import Position, checkpoint_path, save_checkpoint
from log_pipeline.settings import ShipperSettings
from log_pipeline.spool import list_segments
from stack.cli import main
from tests.log_pipeline.conftest import make_sample, write_samples
from tests.log_pipeline.support import (
    PATTERN,
    STREAM,
    metric,
    request_ids,
    root_settings,
    shipped,
    shipping,
    sqlite_docs,
    sqlite_ids,
    wait_until,
)
from tests.log_pipeline.test_spool_root import writer_lock
from tokenpulse.procs import stop_process

DIRS = "tokenpulse_shipper_spool_directories"
BEHIND = "tokenpulse_shipper_spool_directories_behind"
REMOVED = "tokenpulse_shipper_spool_directories_removed_total"
BACKLOG = "tokenpulse_shipper_backlog_bytes"


def _reqs(start: int, stop: int) -> list[str]:
    return sorted(f"req-{i}" for i in range(start, stop))


def test_every_writer_directory_ships_once_including_one_that_appears_later(
    tmp_path: Path,
) -> None:
    root = tmp_path / "spool"
    write_samples(root / "gateway-a", [make_sample(i) for i in range(40)], segment_max_bytes=20_000)
    (root / "lost+found").mkdir()  # no segments, no writer lock: not followed
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        settings = root_settings(root, outputs=["sqlite", "elasticsearch"], es_url=es.url)
        with shipping(settings) as sh:
            wait_until(lambda: shipped(sh, "sqlite") == 40 == shipped(sh, "elasticsearch"), "a")
            assert metric(sh, DIRS) == 1
            write_samples(root / "gateway-b", [make_sample(i) for i in range(40, 100)],
                          segment_max_bytes=20_000)  # fmt: skip
            write_samples(root / "gateway-a", [make_sample(i) for i in range(100, 110)])
            wait_until(lambda: shipped(sh, "sqlite") == 110 == shipped(sh, "elasticsearch"),
                       "both directories")  # fmt: skip
            wait_until(lambda: metric(sh, DIRS) == 2, "the new directory counted")
            for out in ("sqlite", "elasticsearch"):

                def caught_up(out: str = out) -> bool:
                    return metric(sh, BACKLOG, output=out) == 0

                wait_until(caught_up, f"{out} caught up")
                assert metric(sh, BEHIND, output=out) == 0
            wait_until(lambda: all(len(list_segments(root / d)) == 1
                                   for d in ("gateway-a", "gateway-b")),
                       "acknowledged segments deleted in each directory")  # fmt: skip
            assert metric(sh, REMOVED) == 0  # the default grace is an hour
        es_docs = list(es.docs(STREAM).values())
    assert request_ids(es_docs) == _reqs(0, 110)
    assert request_ids(sqlite_docs(settings.sqlite_path)) == _reqs(0, 110)
    for name in ("gateway-a", "gateway-b"):
        for out in ("sqlite", "elasticsearch"):
            assert checkpoint_path(settings.state() / "spools" / name, out).exists()
    assert not (settings.state() / "spools" / "lost+found").exists()


def test_a_backlog_in_one_directory_shows_in_the_aggregate(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    write_samples(root / "gateway-a", [make_sample(i) for i in range(10)])
    write_samples(root / "gateway-b", [make_sample(i) for i in range(10, 20)])
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        es.refuse()
        settings = root_settings(root, outputs=["sqlite", "elasticsearch"], es_url=es.url)
        with shipping(settings) as sh:
            wait_until(lambda: shipped(sh, "sqlite") == 20, "sqlite ships both")
            sizes = sum(p.stat().st_size for d in ("gateway-a", "gateway-b")
                        for p in list_segments(root / d))  # fmt: skip
            wait_until(lambda: metric(sh, BACKLOG, output="elasticsearch") == sizes, "summed")
            assert metric(sh, BEHIND, output="elasticsearch") == 2
            assert metric(sh, "tokenpulse_shipper_oldest_unshipped_age_seconds",
                          output="elasticsearch") > 0  # fmt: skip
            assert metric(sh, BEHIND, output="sqlite") == 0
            es.accept()
            wait_until(lambda: shipped(sh, "elasticsearch") == 20, "after the outage")
            wait_until(lambda: metric(sh, BEHIND, output="elasticsearch") == 0, "none behind")


def test_a_drained_directory_goes_once_its_writer_is_gone_and_returns_with_a_new_one(
    tmp_path: Path,
) -> None:
    root = tmp_path / "spool"
    write_samples(root / "gateway-old", [make_sample(i) for i in range(10)])
    write_samples(root / "gateway-live", [make_sample(i) for i in range(10, 20)])
    settings = root_settings(root, outputs=["sqlite"], spool_dir_remove_after_s=0.3)
    spools = settings.state() / "spools"
    with writer_lock(root / "gateway-live"), shipping(settings) as sh:
        wait_until(lambda: shipped(sh, "sqlite") == 20, "both directories")
        wait_until(lambda: metric(sh, REMOVED) == 1, "the drained one removed")
        assert not (root / "gateway-old").exists()
        assert not (spools / "gateway-old").exists()  # its checkpoints with it
        assert (root / "gateway-live").exists()  # drained as long, but its writer holds it
        wait_until(lambda: metric(sh, DIRS) == 1, "one directory followed")
        # a pod of the same name writes again: a new directory, shipped from its start
        with writer_lock(root / "gateway-old"):  # as the writer process: lock, then write
            write_samples(root / "gateway-old", [make_sample(i) for i in range(20, 25)])
        wait_until(lambda: shipped(sh, "sqlite") == 25, "the returning directory")
        wait_until(lambda: metric(sh, REMOVED) == 2, "drained again, and removed")
    with shipping(settings) as sh:  # the live writer is gone now
        wait_until(lambda: metric(sh, REMOVED) == 1, "the last one removed")
    assert sorted(p.name for p in root.iterdir()) == ["state"]
    assert request_ids(sqlite_docs(settings.sqlite_path)) == _reqs(0, 25)


def test_a_gone_writers_torn_last_line_is_skipped_so_its_directory_drains(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    directory = root / "gateway-a"
    write_samples(directory, [make_sample(i) for i in range(5)])
    (segment,) = list_segments(directory)
    with segment.open("ab") as fh:
        fh.write(b'{"@timestamp":"2026-01-')  # killed mid-line
    settings = root_settings(root, outputs=["sqlite"], spool_dir_remove_after_s=0.2)
    malformed = "tokenpulse_shipper_malformed_lines_total"
    with writer_lock(directory):  # while a writer might still finish the line, it waits
        with shipping(settings) as sh:
            wait_until(lambda: shipped(sh, "sqlite") == 5, "the whole lines")
            wait_until(lambda: metric(sh, BACKLOG, output="sqlite") > 0, "the partial line")
            assert metric(sh, malformed) == 0 and directory.exists()
    with shipping(settings) as sh:
        wait_until(lambda: metric(sh, malformed) == 1, "torn, once the writer is gone")
        wait_until(lambda: not directory.exists(), "then drained and removed")
    assert request_ids(sqlite_docs(settings.sqlite_path)) == _reqs(0, 5)


def test_a_known_output_holds_every_directory_until_forgotten(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    for n, name in enumerate(("gateway-a", "gateway-b")):
        write_samples(root / name, [make_sample(n * 30 + i) for i in range(30)],
                      segment_max_bytes=10_000)  # fmt: skip
    settings = root_settings(root, outputs=["sqlite"], spool_dir_remove_after_s=0.2)
    save_checkpoint(checkpoint_path(settings.state() / "spools" / "gateway-a", "elasticsearch"),
                    Position(1, 0))  # fmt: skip
    counts = {d: len(list_segments(root / d)) for d in ("gateway-a", "gateway-b")}
    with shipping(settings) as sh:
        wait_until(lambda: shipped(sh, "sqlite") == 60, "sqlite")
        write_samples(
            root / "gateway-c", [make_sample(60 + i) for i in range(30)], segment_max_bytes=10_000
        )  # a directory elasticsearch has never seen
        counts["gateway-c"] = len(list_segments(root / "gateway-c"))
        wait_until(lambda: shipped(sh, "sqlite") == 90, "sqlite, the new directory")
        wait_until(lambda: metric(sh, BEHIND, output="elasticsearch") == 3, "held in all three")
        time.sleep(0.5)  # past the grace: a held directory is neither trimmed nor removed
        assert {d: len(list_segments(root / d)) for d in counts} == counts
        assert metric(sh, REMOVED) == 0
    assert main(["shipper", "--spool-root", str(root), "--outputs", "sqlite",
                 "--forget-output", "elasticsearch"]) == 0  # fmt: skip
    assert main(["shipper", "--spool-root", str(root), "--forget-output", "elasticsearch"]) == 2
    with shipping(settings) as sh:
        wait_until(lambda: metric(sh, REMOVED) == 3, "released: drained, no writer, removed")
    assert request_ids(sqlite_docs(settings.sqlite_path)) == _reqs(0, 90)


def test_spool_dir_and_spool_root_exclude_each_other(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="not both"):
        ShipperSettings.model_validate({"spool_dir": tmp_path / "a", "spool_root": tmp_path / "b"})
    root = ShipperSettings.model_validate({"spool_root": tmp_path / "b"})
    assert root.state() == tmp_path / "b" / "state"


def _start(root: Path, db: Path, es_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPULSE_SHIPPER_")}
    cmd = [sys.executable, "-m", "stack.cli", "shipper", "--spool-root", str(root),
           "--outputs", "sqlite", "elasticsearch", "--es-url", es_url, "--sqlite-path", str(db),
           "--batch-records", "7", "--poll-interval-s", "0.02", "--backoff-initial-s", "0.01",
           "--backoff-max-s", "0.2", "--metrics-port", "0"]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log.open("ab"))


@pytest.mark.slow
def test_sigkill_while_shipping_several_directories_duplicates_nothing(tmp_path: Path) -> None:
    """Killed at random points while three writers' directories (one appearing between kills)
    ship: every record reaches each store once."""
    rng = random.Random(20260121)
    root, db, log = tmp_path / "spool", tmp_path / "samples.db", tmp_path / "shipper.log"
    total, chunk = 180, 20
    written = 0
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        es.faults.delay_s = 0.005  # bulk requests in flight long enough to be killed inside

        def stored() -> int:
            return len(sqlite_ids(db)) + len(es.docs(STREAM))

        proc = _start(root, db, es.url, log)
        try:
            for kill in range(3):
                names = ["gateway-a", "gateway-b"] + (["gateway-c"] if kill else [])
                for name in names:
                    write_samples(
                        root / name, [make_sample(i) for i in range(written, written + chunk)]
                    )
                    written += chunk
                before = stored()

                def progressed(before: int = before) -> bool:
                    return stored() > before

                wait_until(progressed, f"progress before kill {kill}")
                time.sleep(rng.uniform(0.0, 0.15))
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
                proc = _start(root, db, es.url, log)
            write_samples(root / "gateway-c", [make_sample(i) for i in range(written, total)])
            wait_until(lambda: len(sqlite_ids(db)) == total == len(es.docs(STREAM)),
                       "every record in both stores", timeout_s=120)  # fmt: skip
        finally:
            stop_process(proc)
        assert request_ids(es.docs(STREAM).values()) == _reqs(0, total)
        assert es.created == total
        resent = sum(es.item_attempts.values()) - total
    assert request_ids(sqlite_docs(db)) == _reqs(0, total)
    assert "Traceback" not in log.read_text()
    print(f"records resent after kills (answered 409, harmless): {resent}")
