"""The HA drill: a Prometheus and an Alertmanager die in the middle of an outage, and on-call
still gets exactly one page, which resolves.

It needs a stack started with `tokenpulse up --ha` (two Prometheus, two gossiping
Alertmanagers). The model server is killed (SIGKILL, as `model-server-killed` does); once
TokenPulseTfServingDown is pending in Prometheus, the first Prometheus and the first Alertmanager
are killed too (SIGKILL, pids from the stack state). The first Alertmanager started first, so it
holds cluster position 0, the peer that notifies at once: the survivor must notice and send in its
place, and the surviving Prometheus must carry the alert. `up` restarts all three after its
restart delay; the page must resolve, no second copy may arrive, and the restarted Alertmanager
must rejoin the cluster.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

from stack.drill.outages import MODELSERVER, restart_bound
from stack.drill.scenario import Expect, Log, Scenario
from stack.drill.target import DrillError, Note, Target, wait_for
from stack.up.state import StackState

PROMETHEUS, PROMETHEUS_2 = "prometheus", "prometheus-2"
ALERTMANAGER, ALERTMANAGER_2 = "alertmanager", "alertmanager-2"
DOWN = "TokenPulseTfServingDown"
PROM_PORTS = ("prometheus_port", "prometheus_2_port")
AM_PORTS = ("alertmanager_port", "alertmanager_2_port")
PENDING_WITHIN_S = 60.0  # model server killed -> TfServingDown pending (a scrape and an eval)
REJOIN_WITHIN_S = 60.0  # restarted Alertmanager -> both peers in the cluster again


class NotHa(DrillError):
    """The stack was not started with --ha."""


def refusal(state: StackState) -> str | None:
    """Why the HA drill cannot run on this stack (None: it can)."""
    if state.config.ha is not None:
        return None
    return (
        f"{HaMonitoringFailover.name} needs a stack started with `tokenpulse up --ha` (two "
        f"Prometheus, two Alertmanagers); {state.config.run_dir} runs one of each"
    )


def applicable(
    scenarios: Sequence[Scenario], state: StackState
) -> tuple[list[Scenario], str | None]:
    """The scenarios to run on this stack and a line to print. Without --ha this drill is
    skipped, and the line says so; when it was the only one chosen, nothing is left to run and
    the line is the refusal."""
    why = refusal(state)
    if why is None or not any(s.name == HaMonitoringFailover.name for s in scenarios):
        return list(scenarios), None
    kept = [s for s in scenarios if s.name != HaMonitoringFailover.name]
    if not kept:
        return [], why
    return kept, f"skipping {HaMonitoringFailover.name}: the stack was not started with --ha"


def _pending(target: Target) -> bool:
    alerts = target.prometheus("/api/v1/alerts")["alerts"]
    return any(a["labels"].get("alertname") == DOWN for a in alerts)


def _get(url: str) -> Any:
    """GET a JSON document; None when it does not answer 200 with JSON."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return json.loads(resp.read())
    except (OSError, ValueError):
        return None


def _cluster_peers(target: Target, port_field: str) -> int:
    """How many peers one Alertmanager sees in its cluster (0 when it does not answer)."""
    doc = _get(target.state.url(port_field, "/api/v2/status"))
    if not isinstance(doc, dict):
        return 0
    return len((doc.get("cluster") or {}).get("peers") or [])


def _rules_loaded(target: Target, port_field: str) -> bool:
    """Whether one Prometheus answers with the TfServingDown rule loaded."""
    doc = _get(target.state.url(port_field, "/api/v1/rules?type=alert"))
    groups = doc.get("data", {}).get("groups", []) if isinstance(doc, dict) else []
    return any(r.get("name") == DOWN for g in groups for r in g.get("rules", []))


def _notes(target: Target, since: float, status: str) -> list[Note]:
    return [n for n in target.notes() if n.at >= since and n.alertname == DOWN
            and n.status == status]  # fmt: skip


class HaMonitoringFailover(Scenario):
    """One Prometheus and one Alertmanager die during an outage: exactly one page, resolved."""

    name = "ha-monitoring-failover"
    summary = (
        "SIGKILL the model server; once TfServingDown is pending, SIGKILL prometheus and "
        "alertmanager too; up restarts all three"
    )
    expect = (Expect(DOWN),)
    # position 0 died: the survivor notifies after the peer timeout, or once gossip has
    # declared the dead peer gone (a few seconds), then group_wait
    fire_within_s = 120.0
    # the resolve waits for the restarted Alertmanager to rejoin: until gossip merges its empty
    # notification log with its peer's, the peers disagree on whether the page went out. On a
    # busy 2-core box the rejoin took 2 min once (suite run: cluster whole at 155 s)
    resolve_within_s = 240.0

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        why = refusal(target.state)
        if why is not None:
            raise NotHa(why)
        pids = target.refresh().pids
        missing = [n for n in (PROMETHEUS_2, ALERTMANAGER_2) if n not in pids]
        if missing:
            raise DrillError(f"the stack state has no {', '.join(missing)}")
        model_pid = target.signal(MODELSERVER, signal.SIGKILL)
        log.mark("modelserver_killed")
        if not wait_for(lambda: _pending(target), PENDING_WITHIN_S, every_s=0.2):
            raise DrillError(f"{DOWN} was not pending within {PENDING_WITHIN_S:g} s of the kill")
        log.mark("down_pending")
        killed = {name: target.signal(name, signal.SIGKILL) for name in (PROMETHEUS, ALERTMANAGER)}
        log.mark("monitoring_killed")
        log.remarks.append(
            "killed " + ", ".join(f"{name} (pid {pid})" for name, pid in killed.items())
        )
        yield  # the runner waits for the page, which only the survivors can deliver
        target.wait_restarted(MODELSERVER, model_pid, restart_bound(target))
        log.fault_removed_at = time.time()  # the outage ends here; the page may resolve now
        log.mark("modelserver_restarted")
        for name, pid in killed.items():
            target.wait_restarted(name, pid, target.state.config.restart_delay_s + 60.0)
        log.mark("monitoring_restarted")

    def check(self, target: Target, log: Log) -> None:
        since = log.started
        fired, resolved = _notes(target, since, "firing"), _notes(target, since, "resolved")
        log.remarks.append(f"{DOWN}: {len(fired)} page(s), {len(resolved)} resolution(s)")
        if len(fired) > 1:
            log.problems.append(
                f"{DOWN} paged {len(fired)} times (receivers "
                f"{', '.join(sorted({n.receiver for n in fired}))}): the cluster did not dedupe"
            )
        if len(resolved) > 1:
            log.problems.append(f"{DOWN} resolved {len(resolved)} times")
        # (the pages of the dead peers themselves, were they critical, the runner reports)
        whole = wait_for(
            lambda: all(_cluster_peers(target, f) >= 2 for f in AM_PORTS), REJOIN_WITHIN_S
        )
        if not whole:
            log.problems.append(
                f"the restarted {ALERTMANAGER} did not rejoin the cluster within "
                f"{REJOIN_WITHIN_S:g} s"
            )
        else:
            log.mark("cluster_whole")
        for port_field in PROM_PORTS:
            if not _rules_loaded(target, port_field):
                log.problems.append(f"{port_field}: no {DOWN} rule loaded after the restart")
