"""Alerts on the monitoring itself (kube-prometheus's meta-alerts) and the Watchdog.

Prometheus and Alertmanager are scraped as jobs cfg.jobs.prometheus and .alertmanager. Each
meta-alert carries cfg.meta_labels, so Alertmanager can route it apart from the receivers it
may be reporting broken (a pager whose secret is missing cannot page about itself). The
Watchdog always fires: a dead man's switch outside the stack pages when it stops arriving, which
is how a stopped Prometheus or Alertmanager is noticed at all.
"""

from __future__ import annotations

from monitoring.mixin.config import MixinConfig
from monitoring.mixin.model import Alert
from monitoring.mixin.promql import Timing, number


def _meta(
    cfg: MixinConfig, name: str, expr: str, for_: str, severity: str, summary: str, desc: str
) -> Alert:
    return Alert(name, expr, for_, severity, summary, desc, labels=dict(cfg.meta_labels))


def _down(cfg: MixinConfig, component: str, name: str, what: str) -> list[Alert]:
    """Critical when no instance of the job answers; in HA (two Prometheus, an Alertmanager
    cluster) one down while another answers is a ticket: paging still works, with no spare."""
    up = f"up{cfg.sel(component)}"
    lower = f"{what[0].lower()}{what[1:]}"
    return [
        _meta(
            cfg,
            f"{name}Down",
            f"{up} == 0 unless on (job) ({up} == 1)",
            cfg.down_for,
            "critical",
            f"{what} cannot be scraped.",
            f"Prometheus cannot scrape {lower} at {{{{ $labels.instance }}}} "
            "(job {{ $labels.job }}): alerts may not be evaluated or delivered.",
        ),
        _meta(
            cfg,
            f"{name}Down",
            f"{up} == 0 and on (job) ({up} == 1)",
            cfg.down_for,
            "warning",
            f"One {what} cannot be scraped; another still delivers.",
            f"Prometheus cannot scrape {lower} at {{{{ $labels.instance }}}} "
            "(job {{ $labels.job }}) while another instance of the job answers: alerts are still "
            "evaluated and delivered, with no spare left.",
        ),
    ]


def alerts(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """The Watchdog and the alerts on Prometheus and Alertmanager."""
    w = t(cfg.meta_window)
    prom, am = cfg.sel("prometheus"), cfg.sel("alertmanager")
    errors = f"rate(prometheus_notifications_errors_total{prom}[{w}])"
    sent = f"rate(prometheus_notifications_sent_total{prom}[{w}])"
    # Alertmanager 0.26 added `reason` to the failure counter (one series per reason), which
    # the total lacks: summed away, both label shapes divide one to one
    failed = f"sum without (reason) (rate(alertmanager_notifications_failed_total{am}[{w}]))"
    total = f"sum without (reason) (rate(alertmanager_notifications_total{am}[{w}]))"
    return [
        Alert(
            cfg.watchdog_name,
            "vector(1)",
            "1m",
            "none",
            "Always firing: the alerting pipeline is alive.",
            "Prometheus evaluates rules and Alertmanager delivers (value {{ $value }}). A dead "
            "man's switch outside the stack pages when this stops arriving.",
        ),
        *_down(cfg, "prometheus", "Prometheus", "Prometheus"),
        *_down(cfg, "alertmanager", "Alertmanager", "Alertmanager"),
        _meta(
            cfg,
            "PrometheusRuleFailures",
            f"increase(prometheus_rule_evaluation_failures_total{prom}[{w}]) > 0",
            cfg.meta_for,
            "critical",
            "Prometheus fails to evaluate rules: alerts may be missing.",
            "Prometheus at {{ $labels.instance }} failed {{ $value | humanize }} evaluations "
            f"of rule group {{{{ $labels.rule_group }}}} in {cfg.meta_window}.",
        ),
        _meta(
            cfg,
            "PrometheusMissingRuleEvaluations",
            f"increase(prometheus_rule_group_iterations_missed_total{prom}[{w}]) > 0",
            cfg.meta_for,
            "warning",
            "Prometheus skips rule evaluations: it is too slow to keep up.",
            "Prometheus at {{ $labels.instance }} missed {{ $value | humanize }} evaluations "
            f"of rule group {{{{ $labels.rule_group }}}} in {cfg.meta_window}.",
        ),
        _meta(
            cfg,
            "PrometheusNotConnectedToAlertmanagers",
            f"max_over_time(prometheus_notifications_alertmanagers_discovered{prom}[{w}]) < 1",
            cfg.meta_for,
            "critical",
            "Prometheus knows no Alertmanager: no alert reaches anyone.",
            "Prometheus at {{ $labels.instance }} has discovered {{ $value }} Alertmanagers "
            f"for {cfg.meta_window}.",
        ),
        _meta(
            cfg,
            "PrometheusErrorSendingAlertsToAnyAlertmanager",
            f"min without (alertmanager) ({errors} / {sent}) > {number(cfg.prom_send_error_share)}",
            cfg.meta_for,
            "critical",
            "Prometheus fails to send alerts to every Alertmanager.",
            "Prometheus at {{ $labels.instance }} failed to send "
            "{{ $value | humanizePercentage }} of its alerts to every Alertmanager over "
            f"{cfg.meta_window}.",
        ),
        _meta(
            cfg,
            "AlertmanagerFailedToSendAlerts",
            f"{failed} / {total} > {number(cfg.am_failed_share)}",
            cfg.meta_for,
            "critical",
            "Alertmanager fails to deliver notifications to an integration.",
            "Alertmanager at {{ $labels.instance }} failed to send "
            "{{ $value | humanizePercentage }} of notifications to {{ $labels.integration }} "
            f"over {cfg.meta_window} (a missing secret file fails here, not at start-up).",
        ),
        _meta(
            cfg,
            "AlertmanagerFailedReload",
            f"max_over_time(alertmanager_config_last_reload_successful{am}[{w}]) == 0",
            cfg.meta_for,
            "critical",
            "Alertmanager failed to load its configuration.",
            "Alertmanager at {{ $labels.instance }} runs an old configuration: its last reload "
            "failed (value {{ $value }}).",
        ),
        _meta(  # HA: a split cluster notifies once per part (twice), never less: a ticket
            cfg,
            "AlertmanagerMembersInconsistent",
            f"max_over_time(alertmanager_cluster_members{am}[{w}]) < on (job) group_left () "
            f"count by (job) (max_over_time(alertmanager_cluster_members{am}[{w}]))",
            cfg.meta_for,
            "warning",
            "Alertmanagers do not gossip with each other: they may notify twice.",
            "Alertmanager at {{ $labels.instance }} sees {{ $value }} cluster members, fewer than "
            "the Alertmanagers Prometheus scrapes: a split cluster sends each notification once "
            "per part.",
        ),
    ]
