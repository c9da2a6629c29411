"""Drills on the monitoring itself: a stopped Prometheus, a receiver that cannot send, a silent
Watchdog.

A stopped Prometheus pages nobody by itself: what tells on-call is the Watchdog, an always-firing
alert on its own route, no longer arriving. The drill freezes Prometheus (SIGSTOP: stopped, not
dead, so `up` does not restart it behind the drill's back) and thaws it afterwards (SIGCONT).
With Alertmanager frozen the same way, nothing Prometheus raises reaches anyone: the on-call
receiver's own dead man's switch must page (TokenPulseWatchdogMissing) and resolve when
Alertmanager is back.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import yaml

from monitoring.oncall.deadman import ALERTNAME as WATCHDOG_MISSING
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


def _watchdog_rule(target: Target) -> str:
    """The Watchdog's name in the loaded rules; DrillError when there is none."""
    names = [n for n in target.alert_rules() if is_watchdog(n)]
    if not names:
        raise DrillError("no Watchdog alerting rule in the loaded rules")
    return names[0]


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
    summary = "SIGSTOP every Prometheus; the Watchdog must stop arriving; SIGCONT"
    # the receiver's own dead man's switch may page while Prometheus is frozen: true, and the
    # point of watchdog-silent, not of this drill
    allow = (WATCHDOG_MISSING,)
    rps = 1.0
    settle_s = 0.0

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        name = _watchdog_rule(target)
        every = _arrival_interval(target, name)
        log.remarks.append(f"{name} arrives every {every:.0f} s")
        # every Prometheus: with --ha the second one keeps the Watchdog arriving
        pids = target.signal_every(PROMETHEUS, signal.SIGSTOP)
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
            for pid in pids:
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


ALERTMANAGER = "alertmanager"
# slack on the switch's own bound (its late_after_s): it reads the clock every interval/4 (at
# most 5 s), the last Watchdog Alertmanager sent may have been on its way, and the drill polls
SWITCH_SLACK_S = 8.0


class WatchdogSilent(Scenario):
    """Alertmanager stops: no Watchdog reaches the on-call receiver, whose own dead man's switch
    must page within its bound (late_after_s after the last arrival), and resolve once
    Alertmanager is back. Every Alertmanager of the stack is frozen (SIGSTOP; both with `--ha`,
    or the other would keep the Watchdog coming) and thawed afterwards (SIGCONT)."""

    name = "watchdog-silent"
    summary = "SIGSTOP every Alertmanager; the receiver's own Watchdog page must come; SIGCONT"
    expect = (Expect(WATCHDOG_MISSING, receiver="pager", rule=False),)
    # true while Alertmanager is frozen, and delivered (meta route and pager) once it is back
    allow = (
        "TokenPulseAlertmanagerDown",
        "TokenPulsePrometheusErrorSendingAlertsToAnyAlertmanager",
        "TokenPulsePrometheusNotConnectedToAlertmanagers",
    )
    rps = 1.0
    fire_within_s = 90.0
    resolve_within_s = 90.0

    _late_after = 0.0  # the switch's bound, read when the fault goes on

    def _switch(self, target: Target) -> dict[str, Any]:
        url = target.state.url("oncall_port", "/watchdog")
        try:
            with urllib.request.urlopen(url, timeout=target.timeout_s) as resp:
                doc = json.loads(resp.read())
        except (OSError, ValueError) as exc:
            raise DrillError(f"the on-call receiver's /watchdog: {exc}") from exc
        if not isinstance(doc, dict) or "late_after_s" not in doc:
            raise DrillError(f"the on-call receiver has no dead man's switch: {doc}")
        if not doc.get("switch"):
            raise DrillError("the on-call receiver's dead man's switch is off (up with your own "
                             "--alertmanager-config sends the Watchdog elsewhere)")  # fmt: skip
        return doc

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        every = _arrival_interval(target, _watchdog_rule(target))
        late_after = float(self._switch(target)["late_after_s"])
        log.remarks.append(
            f"Watchdog every {every:.0f} s; the receiver pages after {late_after:g} s"
        )
        pids = target.signal_every(ALERTMANAGER, signal.SIGSTOP)
        log.mark("alertmanager_stopped")
        self._late_after = late_after
        try:
            yield
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
            log.mark("alertmanager_back")

    def check(self, target: Target, log: Log) -> None:
        """The page came within the switch's own bound after the last Watchdog."""
        notes = target.notes()
        fired = [n for n in notes if n.alertname == WATCHDOG_MISSING and n.status == "firing"]
        if not fired:
            return  # the runner reports it missing
        page = fired[-1].at
        before = [n.at for n in notes if is_watchdog(n.alertname) and n.at < page]
        if before:
            silent = page - before[-1]
            log.timings["silent_before_page_s"] = round(silent, 1)
            if silent > self._late_after + SWITCH_SLACK_S:
                log.problems.append(
                    f"{WATCHDOG_MISSING} came {silent:.0f} s after the last Watchdog, past its "
                    f"bound of {self._late_after:g} s (+{SWITCH_SLACK_S:g} s)"
                )
