"""The post-outage holds: info alerts that keep an outage's windowed symptoms silenced after it.

After TF Serving comes back (or a model has an AVAILABLE version again) the outage still fills the
windows of the symptoms it caused, so Alertmanager inhibits those while a hold fires
(alertmanager.py). A hold may only hide what the outage itself explains (issue 26 A.2):

- it starts only with a page that was delivered (for TF Serving down: TfServingDown, or
  TfServingFlapping, the crash loop's one page that stands for its outages): the cause fired for
  at least
  cfg.am_group_wait (Alertmanager sends a group's first notification after group_wait; a
  shorter firing reached nobody, so it explains nothing to anybody). ALERTS_FOR_STATE holds the
  time the cause became active, so "active for its `for` plus group_wait" is a delivered page;
- it is released for good once fresh failures follow the recovery: the model's 5xx over a
  window that starts cfg.fresh_margin (never under the gateway's own wall-clock lag,
  cfg.gateway_recovery_lag) after the cause's target came back (cfg.fresh_*),
  at the fast page tier's rate and with at least cfg.fresh_min_failed of them. For TF Serving
  down, the target must still be up cfg.fresh_confirm after those failures: a server that
  freezes again fails requests at once, but `up` shows it only when that scrape times out, and
  the next outage's first failures are the next outage's (its own page stands for them), not
  fresh failures after this one;
- otherwise it lasts cfg.recovery_window after the page's last firing evaluation.

Each hold's value is the time since its page last fired, in seconds.

"When last" is a mark: a recording rule worth the evaluation's time wherever its condition holds,
read back with `max_over_time` over the hold's window (alerts/README.md, "Recording rules"). The
marks sit in the alert group just before their hold, which comes after every alert it reads
(tfserving.py), so each evaluation's marks see that evaluation's alert state.
"""

from __future__ import annotations

from monitoring.mixin.config import MixinConfig
from monitoring.mixin.model import GATEWAY_PREFIX, Alert, Rule
from monitoring.mixin.promql import Timing, number, render_seconds, seconds
from monitoring.mixin.slis import error_ratio

VERSIONS = "tokenpulse_tfserving_model_versions_available"


def _mark(name: str, expr: str, by: str | None = None) -> Rule:
    """The recording rule `name`: the evaluation's time, for every series of `expr` (or of its
    `by` labels)."""
    if by is not None:
        expr = f"max by ({by}) (\n{expr}\n)"
    return {"record": name, "expr": f"({expr}) * 0 + time()"}


def _last(mark: Rule, window: str, by: str | None = None) -> str:
    """The last evaluation within `window` at which the mark's condition held, per series (or
    per `by`)."""
    last = f"max_over_time({mark['record']}[{window}])"
    return last if by is None else f"max by ({by}) ({last})"


def delivered(cfg: MixinConfig, alertname: str, for_: str, t: Timing) -> str:
    """The series of `alertname` that have been active for its `for` plus group_wait: their page
    went out (Alertmanager's first notification of a group waits group_wait)."""
    secs = int(t.secs(for_)) + int(t.secs(cfg.am_group_wait))
    return f'time() - ALERTS_FOR_STATE{{alertname="{alertname}"}} >= {secs}'


def down_delivered(cfg: MixinConfig, t: Timing) -> str:
    """The model-server targets paged down: TfServingDown, or the crash loop's TfServingFlapping
    (which TfServingDown stays quiet for), delivered. Flapping fires on through its
    keep_firing_for, so its hold runs from the loop's page resolving."""
    down = delivered(cfg, cfg.alertname("TfServingDown"), cfg.down_for, t)
    return f"{down}\nor {delivered(cfg, cfg.alertname('TfServingFlapping'), cfg.flap_for, t)}"


def fresh_failures(cfg: MixinConfig, t: Timing) -> str:
    """Per model: over cfg.fresh_window, 5xx at the fast page tier's rate, and at least
    cfg.fresh_min_failed of them, while no TfServingNoAvailableVersion is pending or firing for
    that model. Failures with no version to serve are that cause's, which pages as itself (a
    state alert, never held): a model server back from a restart with no AVAILABLE version fails
    every request while that alert's `for` runs, and those failures must not end the restart's
    hold and page the burn beside it."""
    slo = cfg.slo("availability")
    threshold = number(cfg.burn_tiers[0].factor * (1 - slo.objective))
    w = t(cfg.fresh_window)
    errors = cfg.sel("gateway", f'code=~"{cfg.error_codes}"')
    count = f"sum by (model) (increase({GATEWAY_PREFIX}requests_total{errors}[{w}]))"
    share = error_ratio(cfg, slo, w, cfg.jobs.selector("gateway"))
    no_version = f'ALERTS{{alertname="{cfg.alertname("TfServingNoAvailableVersion")}"}}'
    return (
        f"(({share} > {threshold}\nand on (model) {count} >= {cfg.fresh_min_failed})\n"
        f"unless on (model) {no_version})"
    )


def _since_recovery(cfg: MixinConfig, t: Timing) -> str:
    """The range a target must have been back for: the fresh window and its margin, which covers
    the gateway's wall-clock lag (cfg.gateway_recovery_lag) however the rules are compressed."""
    margin = max(int(t.secs(cfg.fresh_margin)), seconds(cfg.gateway_recovery_lag))
    return render_seconds(int(t.secs(cfg.fresh_window)) + margin)


def _hold(delivered_at: str, fresh_at: str, by: str) -> str:
    """Seconds since the page last fired, unless fresh failures came after it."""
    return (
        f"time() - (\n{delivered_at}\nunless on ({by}) (\n{fresh_at}\n>= on ({by})\n"
        f"{delivered_at}\n))"
    )


def _why(cfg: MixinConfig, what: str) -> str:
    return (
        f"{what} windowed alerts it explains are inhibited until its effects age out of their "
        f"windows ({cfg.recovery_window}) or fresh failures follow the recovery."
    )


def down_holds(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """After a delivered TfServingDown (or TfServingFlapping) page: per replica, and the whole
    fleet at once."""
    hold, back = t(cfg.recovery_window), _since_recovery(cfg, t)
    ms = cfg.sel("modelserver")
    fresh = fresh_failures(cfg, t)
    by = f"job, instance, {cfg.replica_label}"
    # one series per target: Down and Flapping may both be active at the evaluation that hands over
    sent = f"max by ({by}) (\n{down_delivered(cfg, t)}\n)"
    replica_sent = _mark("replica:tfserving_down_paged:time", sent)
    # back for the fresh window and its margin, and some model failing afresh (the gateway's
    # errors have no replica label: any model's fresh failures release the replica's hold)
    replica_back = _mark(
        "replica:tfserving_back_failing_afresh:time",
        f"min_over_time(up{ms}[{back}]) == 1\nand on () {fresh}",
        by,
    )
    # the fleet: every target's page out at once; back once one target has served since
    fleet_sent = _mark("fleet:tfserving_down_paged:time", f"count({sent}) >= count(up{ms})")
    fleet_back = _mark(
        "fleet:tfserving_back_failing_afresh:time",
        f"max(min_over_time(up{ms}[{back}])) == 1\nand on () {fresh}",
    )
    # ... and still up cfg.fresh_confirm later: those failures did not start its next outage
    lag = t(cfg.fresh_confirm)
    replica_confirmed = _mark(
        "replica:tfserving_back_failing_afresh_confirmed:time",
        f"{replica_back['record']} offset {lag}\nand on ({by}) min_over_time(up{ms}[{lag}]) == 1",
    )
    fleet_confirmed = _mark(
        "fleet:tfserving_back_failing_afresh_confirmed:time",
        f"{fleet_back['record']} offset {lag}\nand on () max(min_over_time(up{ms}[{lag}])) == 1",
    )
    return [
        Alert(
            "TfServingRecentlyDown",
            _hold(_last(replica_sent, hold, by), _last(replica_confirmed, hold, by), by),
            # fires in the evaluation that delivers the page, so the page's symptoms never race it
            "0s",
            "info",
            "TF Serving was paged down within the recovery window; its windowed symptoms stay "
            "silenced.",
            "TokenPulseTfServingDown or TokenPulseTfServingFlapping paged for "
            "{{ $labels.instance }} and last fired "
            "{{ $value | humanizeDuration }} ago: " + _why(cfg, "the"),
            per_replica=True,
            records=(replica_sent, replica_back, replica_confirmed),
        ),
        Alert(
            "TfServingFleetRecentlyDown",
            _hold(_last(fleet_sent, hold), _last(fleet_confirmed, hold), ""),
            "0s",
            "info",
            "Every TF Serving replica was paged down at once within the recovery window.",
            "TokenPulseTfServingDown or TokenPulseTfServingFlapping paged for every replica at "
            "once and last fired "
            "{{ $value | humanizeDuration }} ago: "
            + _why(cfg, "the fleet-wide (SLO burn, quality, traffic)"),
            records=(fleet_sent, fleet_back, fleet_confirmed),
        ),
    ]


def unavailable_holds(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """After a delivered TfServingNoAvailableVersion page: per model and replica, and per model
    on the whole fleet at once."""
    hold, back = t(cfg.recovery_window), _since_recovery(cfg, t)
    ms, ex = cfg.sel("modelserver"), cfg.sel("exporter")
    fresh = fresh_failures(cfg, t)
    by = f"model, {cfg.replica_label}"
    sent = delivered(cfg, cfg.alertname("TfServingNoAvailableVersion"), cfg.no_version_for, t)
    replica_sent = _mark("model_replica:tfserving_no_version_paged:time", sent, by)
    # that model had an AVAILABLE version on the replica all along the fresh window and margin
    replica_back = _mark(
        "model_replica:tfserving_version_back_failing_afresh:time",
        f"min_over_time({VERSIONS}{ex}[{back}]) >= 1\nand on (model) {fresh}",
        by,
    )
    fleet_sent = _mark(
        "model:tfserving_no_version_fleet_paged:time",
        f"count by (model) ({sent}) >= scalar(count(up{ms}))",
    )
    fleet_back = _mark(
        "model:tfserving_version_fleet_back_failing_afresh:time",
        f"max by (model) (min_over_time({VERSIONS}{ex}[{back}])) >= 1\nand on (model) {fresh}",
    )
    return [
        Alert(
            "TfServingRecentlyUnavailable",
            _hold(_last(replica_sent, hold, by), _last(replica_back, hold, by), by),
            # fires in the evaluation that delivers the page, as TfServingRecentlyDown
            "0s",
            "info",
            "A model was paged with no AVAILABLE version within the recovery window; its "
            "windowed symptoms stay silenced.",
            "TokenPulseTfServingNoAvailableVersion paged for model {{ $labels.model }} and last "
            "fired {{ $value | humanizeDuration }} ago: " + _why(cfg, "that model's"),
            per_replica=True,
            records=(replica_sent, replica_back),
        ),
        Alert(
            "TfServingFleetRecentlyUnavailable",
            _hold(_last(fleet_sent, hold), _last(fleet_back, hold), "model"),
            "0s",
            "info",
            "A model was paged with no AVAILABLE version on every TF Serving replica at once "
            "within the recovery window.",
            "TokenPulseTfServingNoAvailableVersion paged for model {{ $labels.model }} on every "
            "replica at once and last fired {{ $value | humanizeDuration }} ago: "
            + _why(cfg, "that model's fleet-wide (SLO burn, quality, traffic)"),
            records=(fleet_sent, fleet_back),
        ),
    ]
