"""The post-outage holds: info alerts that keep an outage's windowed symptoms silenced after it.

After TF Serving comes back (or a model has an AVAILABLE version again) the outage still fills the
windows of the symptoms it caused, so Alertmanager inhibits those while a hold fires
(alertmanager.py). A hold may only hide what the outage itself explains (issue 26 A.2):

- it starts only with a page that was delivered (for TF Serving down: TfServingDown, or
  TfServingFlapping, the crash loop's one page that stands for its outages): the cause fired for
  at least
  config.AM_GROUP_WAIT (Alertmanager sends a group's first notification after group_wait; a
  shorter firing reached nobody, so it explains nothing to anybody). ALERTS_FOR_STATE holds the
  time the cause became active, so "active for its `for` plus group_wait" is a delivered page;
- it is released for good once fresh failures follow the recovery: the model's 5xx over a
  window that starts config.FRESH_MARGIN after the cause's target came back (config.FRESH_*),
  at the fast page tier's rate and with at least config.FRESH_MIN_FAILED of them;
- otherwise it lasts config.RECOVERY_WINDOW after the page's last firing evaluation.

Each hold's value is the time since its page last fired, in seconds.
"""

from __future__ import annotations

from monitoring.mixin import config as c
from monitoring.mixin.model import GATEWAY_PREFIX, Alert
from monitoring.mixin.promql import Timing, number, render_seconds, sel
from monitoring.mixin.slis import error_ratio

DOWN = f"{c.ALERT_PREFIX}TfServingDown"
FLAPPING = f"{c.ALERT_PREFIX}TfServingFlapping"
NO_VERSION = f"{c.ALERT_PREFIX}TfServingNoAvailableVersion"
VERSIONS = "tokenpulse_tfserving_model_versions_available"


def _last(expr: str, window: str) -> str:
    """The last evaluation step within `window` at which `expr` had a result, per series."""
    return f"max_over_time((({expr}) * 0 + time())[{window}:])"


def delivered(alertname: str, for_: str, t: Timing) -> str:
    """The series of `alertname` that have been active for its `for` plus group_wait: their page
    went out (Alertmanager's first notification of a group waits group_wait)."""
    secs = int(t.secs(for_)) + int(t.secs(c.AM_GROUP_WAIT))
    return f'time() - ALERTS_FOR_STATE{{alertname="{alertname}"}} >= {secs}'


def down_delivered(t: Timing) -> str:
    """The model-server targets paged down: TfServingDown, or the crash loop's TfServingFlapping
    (which TfServingDown stays quiet for), delivered. Flapping fires on through its
    keep_firing_for, so its hold runs from the loop's page resolving."""
    return f"{delivered(DOWN, c.DOWN_FOR, t)}\nor {delivered(FLAPPING, c.FLAP_FOR, t)}"


def fresh_failures(t: Timing) -> str:
    """Per model: over config.FRESH_WINDOW, 5xx at the fast page tier's rate, and at least
    config.FRESH_MIN_FAILED of them."""
    slo = next(s for s in c.SLOS if s.name == "availability")
    threshold = number(c.BURN_TIERS[0].factor * (1 - slo.objective))
    w = t(c.FRESH_WINDOW)
    errors = sel("gateway", f'code=~"{c.ERROR_CODES}"')
    count = f"sum by (model) (increase({GATEWAY_PREFIX}requests_total{errors}[{w}]))"
    share = error_ratio(slo, w, c.JOBS.selector("gateway"))
    return f"({share} > {threshold}\nand on (model) {count} >= {c.FRESH_MIN_FAILED})"


def _since_recovery(t: Timing) -> str:
    """The range a target must have been back for: the fresh window and its margin."""
    return render_seconds(int(t.secs(c.FRESH_WINDOW)) + int(t.secs(c.FRESH_MARGIN)))


def _hold(delivered_at: str, fresh_at: str, by: str) -> str:
    """Seconds since the page last fired, unless fresh failures came after it."""
    return (
        f"time() - (\n{delivered_at}\nunless on ({by}) (\n{fresh_at}\n>= on ({by})\n"
        f"{delivered_at}\n))"
    )


def _why(what: str) -> str:
    return (
        f"{what} windowed alerts it explains are inhibited until its effects age out of their "
        f"windows ({c.RECOVERY_WINDOW}) or fresh failures follow the recovery."
    )


def down_holds(t: Timing) -> list[Alert]:
    """After a delivered TfServingDown (or TfServingFlapping) page: per replica, and the whole
    fleet at once."""
    hold, back = t(c.RECOVERY_WINDOW), _since_recovery(t)
    ms = sel("modelserver")
    fresh = fresh_failures(t)
    by = f"job, instance, {c.REPLICA_LABEL}"
    # one series per target: Down and Flapping may both be active at the evaluation that hands over
    sent = f"max by ({by}) (\n{down_delivered(t)}\n)"
    replica_sent = f"max by ({by}) ({_last(sent, hold)})"
    # back for the fresh window and its margin, and some model failing afresh (the gateway's
    # errors have no replica label: any model's fresh failures release the replica's hold)
    replica_back = f"min_over_time(up{ms}[{back}]) == 1\nand on () {fresh}"
    replica_fresh = f"max by ({by}) ({_last(replica_back, hold)})"
    # the fleet: every target's page out at once; back once one target has served since
    fleet_sent = _last(f"count({sent}) >= count(up{ms})", hold)
    fleet_back = f"max(min_over_time(up{ms}[{back}])) == 1\nand on () {fresh}"
    fleet_fresh = _last(fleet_back, hold)
    return [
        Alert(
            "TfServingRecentlyDown",
            _hold(replica_sent, replica_fresh, by),
            # fires in the evaluation that delivers the page, so the page's symptoms never race it
            "0s",
            "info",
            "TF Serving was paged down within the recovery window; its windowed symptoms stay "
            "silenced.",
            "TokenPulseTfServingDown or TokenPulseTfServingFlapping paged for "
            "{{ $labels.instance }} and last fired "
            "{{ $value | humanizeDuration }} ago: " + _why("the"),
            per_replica=True,
        ),
        Alert(
            "TfServingFleetRecentlyDown",
            _hold(fleet_sent, fleet_fresh, ""),
            "0s",
            "info",
            "Every TF Serving replica was paged down at once within the recovery window.",
            "TokenPulseTfServingDown or TokenPulseTfServingFlapping paged for every replica at "
            "once and last fired "
            "{{ $value | humanizeDuration }} ago: "
            + _why("the fleet-wide (SLO burn, quality, traffic)"),
        ),
    ]


def unavailable_holds(t: Timing) -> list[Alert]:
    """After a delivered TfServingNoAvailableVersion page: per model and replica, and per model
    on the whole fleet at once."""
    hold, back = t(c.RECOVERY_WINDOW), _since_recovery(t)
    ms, ex = sel("modelserver"), sel("exporter")
    fresh = fresh_failures(t)
    by = f"model, {c.REPLICA_LABEL}"
    sent = delivered(NO_VERSION, c.NO_VERSION_FOR, t)
    replica_sent = f"max by ({by}) ({_last(sent, hold)})"
    # that model had an AVAILABLE version on the replica all along the fresh window and margin
    replica_back = f"min_over_time({VERSIONS}{ex}[{back}]) >= 1\nand on (model) {fresh}"
    replica_fresh = f"max by ({by}) ({_last(replica_back, hold)})"
    fleet_sent = _last(f"count by (model) ({sent}) >= scalar(count(up{ms}))", hold)
    fleet_back = f"max by (model) (min_over_time({VERSIONS}{ex}[{back}])) >= 1\n" + (
        f"and on (model) {fresh}"
    )
    fleet_fresh = _last(fleet_back, hold)
    return [
        Alert(
            "TfServingRecentlyUnavailable",
            _hold(replica_sent, replica_fresh, by),
            # fires in the evaluation that delivers the page, as TfServingRecentlyDown
            "0s",
            "info",
            "A model was paged with no AVAILABLE version within the recovery window; its "
            "windowed symptoms stay silenced.",
            "TokenPulseTfServingNoAvailableVersion paged for model {{ $labels.model }} and last "
            "fired {{ $value | humanizeDuration }} ago: " + _why("that model's"),
            per_replica=True,
        ),
        Alert(
            "TfServingFleetRecentlyUnavailable",
            _hold(fleet_sent, fleet_fresh, "model"),
            "0s",
            "info",
            "A model was paged with no AVAILABLE version on every TF Serving replica at once "
            "within the recovery window.",
            "TokenPulseTfServingNoAvailableVersion paged for model {{ $labels.model }} on every "
            "replica at once and last fired {{ $value | humanizeDuration }} ago: "
            + _why("that model's fleet-wide (SLO burn, quality, traffic)"),
        ),
    ]
