"""The run's cost line: the machine's busy CPU-seconds and the host's reference loop."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.support.runcost import REFERENCE_ADDITIONS, RunCost, busy_cpu_s

TICK = os.sysconf("SC_CLK_TCK")


def test_busy_seconds_are_every_state_but_idle_and_iowait(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text("cpu  100 5 50 9000 700 3 2 40 0 0\ncpu0 50 2 25 4500 350 1 1 20 0 0\n")
    assert busy_cpu_s(stat) == (100 + 5 + 50 + 3 + 2 + 40) / TICK


def test_a_missing_or_foreign_stat_file_gives_none(tmp_path: Path) -> None:
    assert busy_cpu_s(tmp_path / "absent") is None
    for text in ("", "intr 1 2 3\n", "cpu  1 2 3\n", "cpu  a b c d e f g h\n"):
        (tmp_path / "stat").write_text(text)
        assert busy_cpu_s(tmp_path / "stat") is None, text


def test_the_machine_counts_the_cpu_this_process_burns() -> None:
    before = busy_cpu_s()
    assert before is not None  # Linux: the suite's machines
    start = time.process_time()
    while time.process_time() - start < 0.3:
        pass
    after = busy_cpu_s()
    assert after is not None and after - before >= 0.3 - 2 / TICK


def test_the_line_names_the_cpu_the_wall_the_cores_and_the_host_speed() -> None:
    cost = RunCost.start()
    assert cost.reference_s > 0 and cost.busy_s is not None
    line = cost.line(cores=2)
    assert line.startswith("run cost: ") and " CPU-s busy on this machine over " in line
    assert " of the 2 cores the run may use; " in line
    assert f"({REFERENCE_ADDITIONS:,} Python additions) in {cost.reference_s:.2f} CPU-s" in line


def test_without_proc_stat_the_line_keeps_the_wall_and_the_host_speed() -> None:
    line = RunCost(busy_s=None, wall=time.monotonic() - 5, reference_s=0.4).line(cores=2)
    assert line.startswith("run cost: 5 s wall; ") and line.endswith(" in 0.40 CPU-s")
