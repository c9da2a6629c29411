"""The gateway's alerts: SLO burn rates, throughput, traffic, saturation, targets and breaker.

Every SLO alert is a multi-window multi-burn-rate rule (SRE Workbook ch. 5) over the recorded
SLIs, guarded by a count of bad events; `symptom=True` marks alerts that a down model server (or
a model with no AVAILABLE version) explains, which Alertmanager then inhibits.
"""

from __future__ import annotations

from monitoring.mixin.alerts.common import down, traffic
from monitoring.mixin.config import MixinConfig
from monitoring.mixin.model import (
    GATEWAY_PREFIX,
    TRAFFIC_RATE,
    Alert,
    baseline,
    quality_current,
    sli_name,
)
from monitoring.mixin.promql import Timing, number

SLO_NAMES = {
    "availability": ("GatewayAvailabilityBudgetBurn", "answering with server errors"),
    "latency": ("GatewayLatencyBudgetBurn", "answering too slowly end to end"),
    "tpot": ("GatewayTokenLatencyBudgetBurn", "generating too slowly per output token"),
    "ttft": ("GatewayTtftBudgetBurn", "slow to stream the first token"),
}
# The events each SLO's ratio is a share of (its denominator), for the bad-event count: latency
# counts answered requests only, TPOT and TTFT their histograms' observations (TTFT: streams).
SLO_EVENTS = {
    "availability": "requests_total",
    "latency": 'request_duration_seconds_count{code=~"2.."}',
    "tpot": "time_per_output_token_seconds_count",
    "ttft": "time_to_first_token_seconds_count",
}


def _bad_events(cfg: MixinConfig, slo: str, window: str, t: Timing) -> str:
    """The burn's guard: at least MIN_BAD_EVENTS bad events of the SLO in the (long) window, per
    model: its recorded ratio times the events it is a share of."""
    metric, _, extra = SLO_EVENTS[slo].partition("{")
    s = cfg.sel("gateway", extra.rstrip("}"))
    events = f"sum by (model) (increase({GATEWAY_PREFIX}{metric}{s}[{t(window)}]))"
    ratio = f"max without (window) ({sli_name(slo, window)})"
    return f"{ratio} * on (model) {events} >= {cfg.min_bad_events}"


def slo_alerts(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """Multi-window multi-burn-rate alerts, one rule per tier, window labels removed first."""
    out = []
    for slo in cfg.slos:
        name, what = SLO_NAMES[slo.name]
        for tier in cfg.burn_tiers:
            thr = number(tier.factor * (1 - slo.objective))
            # the guard is a count of bad events in the long window, not a rate: a model with
            # little traffic that fails every request pages, 3 errors in an hour do not
            expr = (
                f"max without (window) ({sli_name(slo.name, tier.long)} > {thr})\n"
                f"and max without (window) ({sli_name(slo.name, tier.short)} > {thr})\n"
                f"and on (model) ({_bad_events(cfg, slo.name, tier.long, t)})"
            )
            out.append(
                Alert(
                    name,
                    expr,
                    tier.for_,
                    tier.severity,
                    f"A model is {what}, burning its {slo.name} error budget.",
                    f"Model {{{{ $labels.model }}}}: {{{{ $value | humanizePercentage }}}} of "
                    f"requests miss the {slo.name} SLO ({slo.description}; objective "
                    f"{number(slo.objective * 100)}%) over {tier.long} and {tier.short}: the "
                    f"{cfg.slo_period} budget burns {number(tier.factor)}x too fast.",
                    symptom=True,
                    windowed=True,
                    labels={"slo": slo.name, "long_window": tier.long},
                )
            )
    return out


def throughput_alerts(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """Generation speed (output tokens per second of upstream time) far under its baseline."""
    out = []
    speed = quality_current("speed")
    out.append(
        Alert(
            "GatewayThroughputDrop",
            f"{speed} < {number(cfg.tokens_drop_share)} * {baseline('speed')}\n"
            f"and on (model) {traffic(cfg, t(cfg.tokens_window))}",
            cfg.tokens_for,
            "warning",
            "A model generates tokens much more slowly than usual.",
            f"Model {{{{ $labels.model }}}}: {{{{ $value | humanize }}}} output tokens per "
            f"second of upstream time, under {number(cfg.tokens_drop_share * 100)}% of its "
            f"{cfg.baseline_window} baseline.",
            symptom=True,
            windowed=True,
        )
    )
    return out


def traffic_alerts(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """Traffic collapse against the same window a day and a week ago; gateway saturation."""
    day, week = t("1d"), t("7d")
    w = t(cfg.saturation_window)
    g = cfg.sel("gateway")
    share = number(cfg.traffic_collapse_share)

    def rate(metric: str) -> str:
        return f"rate({GATEWAY_PREFIX}{metric}{g}[{w}])"

    shed = f"sum by (model) ({rate('shed_total')}) / sum by (model) ({rate('requests_total')})"
    wait = f"sum({rate('queue_wait_seconds_sum')}) / sum({rate('queue_wait_seconds_count')})"
    refused = cfg.sel("gateway", 'reason="max_connections"')
    refused_rate = f"rate({GATEWAY_PREFIX}connections_rejected_total{refused}[{w}])"
    return [
        Alert(
            "GatewayTrafficCollapse",
            f"{TRAFFIC_RATE} < {share} * ({TRAFFIC_RATE} offset {day})\n"
            f"and {TRAFFIC_RATE} < {share} * ({TRAFFIC_RATE} offset {week})\n"
            f"and ({TRAFFIC_RATE} offset {day}) > {number(cfg.min_request_rate)}\n"
            f"and ({TRAFFIC_RATE} offset {week}) > {number(cfg.min_request_rate)}",
            cfg.traffic_collapse_for,
            "warning",
            "A model gets far fewer requests than a day and a week ago.",
            'Model {{ $labels.model }}: {{ $value | printf "%.2g" }} requests/s over '
            f"{cfg.traffic_window}, under {number(cfg.traffic_collapse_share * 100)}% of the same "
            "window a day and a week ago: callers may not reach the gateway.",
            symptom=True,
            windowed=True,
        ),
        Alert(
            "GatewaySaturated",
            f"({shed}) > {number(cfg.shed_share)}\n"
            f"or on () {wait} > {number(cfg.queue_wait_s)}\n"
            f"or on () sum({refused_rate}) > {number(cfg.rejected_connections_rate)}",
            cfg.saturation_for,
            "warning",
            "The gateway is saturated: it sheds requests, queues deeply or refuses connections.",
            "Over {{ with $labels.model }}model {{ . }}: {{ end }}the last "
            f"{cfg.saturation_window} the gateway shed over {number(cfg.shed_share * 100)}% of "
            f"requests, made them wait over {number(cfg.queue_wait_s)} s on average for a "
            "concurrency slot or refused connections at max_connections (value "
            '{{ $value | printf "%.2g" }}).',
        ),
    ]


def target_alerts(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """A gateway target down, and its upstream circuit breaker open."""
    return [
        down(cfg, "gateway", "Gateway", "critical", "The gateway"),
        Alert(
            "GatewayCircuitBreakerOpen",
            # the breaker half-opens every few seconds to probe: look at the window's worst
            "max_over_time(tokenpulse_gateway_circuit_breaker_state"
            f"{cfg.sel('gateway')}[{t(cfg.breaker_for)}]) == 2",
            cfg.breaker_for,
            "warning",
            "The gateway's circuit breaker to TF Serving is open.",
            "The gateway at {{ $labels.instance }} fails requests fast: its upstream breaker "
            "opened after repeated upstream failures.",
            symptom=True,
            windowed=True,  # the window's worst state holds the outage for BREAKER_FOR
        ),
    ]


def fleet_alerts(cfg: MixinConfig) -> list[Alert]:
    """The whole gateway fleet paged down: the one cause that explains every model's gateway
    symptoms (one pod of several down explains only its own)."""
    paged = f'ALERTS{{alertname="{cfg.alert_prefix}GatewayDown",alertstate="firing"}}'
    return [
        Alert(
            "GatewayFleetDown",
            # no labels, like the fleet-wide symptoms it explains (SLO burns carry none of a pod)
            f"count({paged}) >= count(up{cfg.sel('gateway')})",
            # fires in the evaluation after the pages fire: it notifies nobody, it only inhibits
            "0s",
            "info",
            "Every gateway target is paged down at once.",
            "TokenPulseGatewayDown fires for every gateway target ({{ $value }}): the fleet-wide "
            "gateway symptoms it explains (SLO burns, traffic, throughput) are inhibited while "
            "it lasts.",
        )
    ]


def alerts(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """Every gateway alert, in rule-file order."""
    return [
        *slo_alerts(cfg, t),
        *throughput_alerts(cfg, t),
        *traffic_alerts(cfg, t),
        *target_alerts(cfg, t),
        *fleet_alerts(cfg),
    ]
