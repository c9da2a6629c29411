"""`tokenpulse up --ha` and its drill: a Prometheus and an Alertmanager die in an outage.

One `up --ha` (tiny model, compressed rules, 2 s scrapes, a 20 s restart delay) runs
`tokenpulse drill ha-monitoring-failover`, as an operator would from another terminal: the model
server is killed, then, once TfServingDown is pending, the first Prometheus and the first
Alertmanager (the cluster's position 0, the peer that would notify). The survivors must deliver
exactly one page, `up` restarts all three, and the page resolves once. Then Ctrl-C stops every
process of both pairs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from stack.cli import main as cli_main
from stack.up.settings import HA_PORT_FIELDS
from tests.e2e.upstack import UpStack, alive, running_up
from tests.support.binaries import needs_prometheus
from tests.support.models import install_version
from tokenpulse.procs import free_port

pytestmark = [pytest.mark.slow, needs_prometheus]

# group_interval over a scrape and an evaluation (the test profile's 2 s + 2 s), as --ha requires;
# versions 1 and 2 both the healthy export, so nothing but the drill's outage alerts
HA_FLAGS = ("--ha", "--preset=tiny", "--group-wait=5s", "--group-interval=5s",
            "--watchdog-interval=5s", "--fast-polls")  # fmt: skip
DOWN = "TokenPulseTfServingDown"


@pytest.fixture(scope="module")
def ha_up(tiny_export: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpStack]:
    workdir = tmp_path_factory.mktemp("ha-stack")
    base = workdir / "models" / "gen"
    for version in (1, 2):
        install_version(tiny_export, base, version)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPULSE_")}
    ha_ports = [f"--{name.replace('_', '-')}={free_port()}" for name in HA_PORT_FIELDS]
    with running_up(workdir, *HA_FLAGS, *ha_ports, env=env) as stack:
        yield stack


def test_a_prometheus_and_an_alertmanager_killed_in_an_outage_still_page_once(
    ha_up: UpStack, capsys: pytest.CaptureFixture[str]
) -> None:
    pids = ha_up.pids()
    assert {"prometheus", "prometheus-2", "alertmanager", "alertmanager-2"} <= set(pids)
    report = ha_up.workdir / "drill-report.json"
    code = cli_main(["drill", "ha-monitoring-failover", f"--run-dir={ha_up.run_dir}",
                     f"--report={report}"])  # fmt: skip
    out = capsys.readouterr().out
    print(out)
    assert code == 0, out
    (result,) = json.loads(report.read_text())["scenarios"]
    assert result["passed"] and result["unexpected_pages"] == []
    (page,) = result["expected"]
    assert page["alertname"] == DOWN and page["receiver"] == "pager"
    assert page["fired_after_s"] is not None and page["resolved_after_s"] is not None
    marks = result["timings"]  # seconds after the drill's start
    assert marks["modelserver_killed"] <= marks["down_pending"] <= marks["monitoring_killed"]
    assert marks["monitoring_killed"] <= marks["fault_on"]  # killed before the page was awaited
    assert f"{DOWN}: 1 page(s), 1 resolution(s)" in result["remarks"]
    # on-call's whole view: one page of the outage, one resolution
    everything = [(n["receiver"], a["status"], a["labels"]["alertname"], a["labels"]["severity"])
                  for n in ha_up.notifications() for a in n["alerts"]]  # fmt: skip
    print("notifications:", [e for e in everything if e[2] != "Watchdog"])
    notes = [a for n in ha_up.notifications() for a in n["alerts"]
             if a["labels"]["alertname"] == DOWN]  # fmt: skip
    assert [a["status"] for a in notes] == ["firing", "resolved"]
    assert "prometheus_replica" not in notes[0]["labels"]  # dropped before sending


def test_ctrl_c_stops_both_of_each(ha_up: UpStack) -> None:
    started = list(ha_up.pids().values())
    assert ha_up.interrupt() == 0
    assert alive(started) == []
    assert f"stopped all {len(ha_up.pids())} processes" in ha_up.banner
