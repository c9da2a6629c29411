"""`tokenpulse bench malloc` runs the same TensorFlow work on glibc's malloc and on tcmalloc and
sets them side by side (figures only, no timing asserted)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from devtools.bench import malloc
from stack import allocator
from tests.support.scheduling import COMPUTING_TEST_TIMEOUT_S, COMPUTING_TIMEOUT_S


@pytest.mark.slow  # two TensorFlow processes that train: `make test`, not the inner loop
@pytest.mark.timeout(COMPUTING_TEST_TIMEOUT_S)
def test_both_allocators_run_the_work_and_are_reported_side_by_side() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "malloc", "--runs", "1", "--steps", "2",
         "--generations", "1", "--new-tokens", "4", "--json"],
        capture_output=True, text=True, timeout=COMPUTING_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "run 1/1: tcmalloc" in done.stderr  # progress goes to stderr
    doc = json.loads(done.stdout)
    med, ratio = doc["medians"], doc["ratio_tcmalloc_over_glibc"]
    for arm in malloc.ARMS:
        (run,) = doc["runs"][arm]  # each child checked its own map for the allocator
        assert run["cpu_s"] == pytest.approx(run["user_s"] + run["sys_s"])
        assert run["train_s"] > 0 and run["generate_s"] > 0 and run["wall_s"] > run["train_s"]
        assert 0 < med[arm]["sys_share"] < 1
    assert ratio["cpu_s"] == pytest.approx(med["tcmalloc"]["cpu_s"] / med["glibc"]["cpu_s"])


def test_without_the_library_it_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(allocator, "FOLDERS", ())
    assert malloc.main(argparse.Namespace()) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench malloc: error: libtcmalloc_minimal.so.4 is not installed")
    assert "apt-get install libtcmalloc-minimal4" in err
