"""Drills on the monitoring itself: a stopped Prometheus, a receiver that cannot send.

A stopped Prometheus pages nobody by itself: what tells on-call is the Watchdog, an always-firing
alert on its own route, no longer arriving. The drill freezes Prometheus (SIGSTOP: stopped, not
dead, so `up` does not restart it behind the drill's back) and thaws it afterwards (SIGCONT).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator

import yaml

from stack.drill.scenario import Expect, Log, Scenario
from stack.drill.target import DrillError, Target, is_watchdog, wait_for

PROMETHEUS = "prometheus"
ARRIVAL_BOUND_S = 120.0  # the Watchdog arrives at least this often when all is well
# after Prometheus stops: Alertmanager drops the alert after 4 resend delays (compressed: 4 s),
# and a notification already being sent may still land
GRACE_S = 10.0


def _watchdog_arrivals(target: Target, name: str, since: float) -> list[float]:
    notes = target.notes()
    return [n.at for n in notes if n.alertname == name and n.status == "firing" and n.at > since]


def _arrival_interval(target: Target, name: str) -> float:
    """Seconds between Watchdog arrivals: from the last two, if the latest is recent; else
    waits for two more (DrillError when none comes)."""
    past = _watchdog_arrivals(target, name, 0.0)
    if len(past) >= 2 and time.time() - past[-1] < 2 * (past[-1] - past[-2]) + GRACE_S:
        return past[-1] - past[-2]
    start = time.time()
    wait_for(lambda: len(_watchdog_arrivals(target, name, start)) >= 2, ARRIVAL_BOUND_S)
    arrivals = _watchdog_arrivals(target, name, start)
    if not arrivals:
        raise DrillError(f"{name} did not arrive within {ARRIVAL_BOUND_S:g} s")
    return arrivals[-1] - arrivals[-2] if len(arrivals) >= 2 else ARRIVAL_BOUND_S / 2


class PrometheusStopped(Scenario):
    """Prometheus stops: the Watchdog stops arriving at the receiver, and comes back after."""

    name = "prometheus-stopped"
    summary = "SIGSTOP Prometheus; the Watchdog must stop arriving; SIGCONT"
    rps = 1.0
    settle_s = 0.0

    def _watchdog(self, target: Target) -> str:
        names = [n for n in target.alert_rules() if is_watchdog(n)]
        if not names:
            raise DrillError("no Watchdog alerting rule in the loaded rules")
        return names[0]

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        name = self._watchdog(target)
        every = _arrival_interval(target, name)
        log.remarks.append(f"{name} arrives every {every:.0f} s")
        pid = target.signal(PROMETHEUS, signal.SIGSTOP)
        stopped = time.time()
        log.mark("prometheus_stopped")
        try:
            time.sleep(GRACE_S + 1.5 * every)
            late = _watchdog_arrivals(target, name, stopped + GRACE_S)
            log.timings["watchdog_silent_for_s"] = round(time.time() - stopped, 1)
            if late:
                log.problems.append(
                    f"{name} kept arriving {late[-1] - stopped:.0f} s after Prometheus stopped"
                )
            yield
        finally:
            os.kill(pid, signal.SIGCONT)
        thawed = time.time()
        back = wait_for(lambda: _watchdog_arrivals(target, name, thawed), ARRIVAL_BOUND_S)
        if not back:
            log.problems.append(f"{name} did not come back within {ARRIVAL_BOUND_S:g} s")
        else:
            log.timings["watchdog_back_after_s"] = round(back[0] - thawed, 1)


SYNTHETIC = "TokenPulseDrillSyntheticPage"


class AlertmanagerSecretMissing(Scenario):
    """A receiver's secret file is missing: Alertmanager 0.25 loads the config and fails only
    when it sends. The meta-alert must reach its own route (no secret), not the broken pager.

    The drill swaps the local pager webhook for the deployment's PagerDuty receiver with its
    routing-key file absent, reloads Alertmanager, and posts one synthetic critical alert to it
    (the page that cannot be delivered); afterwards it ends that alert, puts the config back and
    reloads again.
    """

    name = "alertmanager-secret-missing"
    summary = "pager receiver reads a missing routing_key_file; a synthetic page cannot be sent"
    expect = (Expect("TokenPulseAlertmanagerFailedToSendAlerts", receiver="meta"),)
    rps = 1.0

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        config = target.state.path("alertmanager.yml")
        original = config.read_text()
        missing = target.state.path("drill") / "missing" / "pagerduty-routing-key"
        doc = yaml.safe_load(original)
        for receiver in doc["receivers"]:
            if receiver["name"] == "pager":
                receiver.pop("webhook_configs", None)
                receiver["pagerduty_configs"] = [
                    {"routing_key_file": str(missing), "send_resolved": True}
                ]
        try:
            config.write_text(yaml.safe_dump(doc, sort_keys=False))
            target.alertmanager_reload()
            log.mark("secret_removed")
            target.post_alert(SYNTHETIC, ends_in_s=3600)
            yield
        finally:
            target.post_alert(SYNTHETIC, ends_in_s=0)
            config.write_text(original)
            target.alertmanager_reload()
            log.mark("secret_restored")
