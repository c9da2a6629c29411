"""Alerting rules from the mixin config: SLO burn rates, degradation, health.

Every alert gets `for`, `severity`, a static summary, a templated description and a runbook URL
from config.RUNBOOK_URL_PATTERN; `symptom=True` marks alerts that a down model server (or a model
with no AVAILABLE version) explains, which Alertmanager then inhibits.
"""

from __future__ import annotations

from monitoring.mixin import config as c
from monitoring.mixin.canary import live_alerts
from monitoring.mixin.health import health_alerts, in_flight_per_replica
from monitoring.mixin.meta import meta_alerts
from monitoring.mixin.model import (
    GATEWAY_PREFIX,
    TRAFFIC_RATE,
    Alert,
    baseline,
    quality_current,
    sli_name,
)
from monitoring.mixin.promql import Timing, number, sel
from tokenpulse.tfserving.signature import FINISH_LENGTH

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


def _traffic(window: str, metric: str = "requests_total") -> str:
    """The minimum-traffic guard: the model had enough requests in the window."""
    rate = f"rate({GATEWAY_PREFIX}{metric}{sel('gateway')}[{window}])"
    return f"sum by (model) ({rate}) > {number(c.MIN_REQUEST_RATE)}"


def _bad_events(slo: str, window: str, t: Timing) -> str:
    """The burn's guard: at least MIN_BAD_EVENTS bad events of the SLO in the (long) window, per
    model: its recorded ratio times the events it is a share of."""
    metric, _, extra = SLO_EVENTS[slo].partition("{")
    s = sel("gateway", extra.rstrip("}")) if extra else sel("gateway")
    events = f"sum by (model) (increase({GATEWAY_PREFIX}{metric}{s}[{t(window)}]))"
    ratio = f"max without (window) ({sli_name(slo, window)})"
    return f"{ratio} * on (model) {events} >= {c.MIN_BAD_EVENTS}"


def _min_events(metric: str, window: str, count: int, extra: str = "") -> str:
    """At least `count` events of a counter in the window, per model."""
    s = sel("gateway", extra) if extra else sel("gateway")
    return f"sum by (model) (increase({GATEWAY_PREFIX}{metric}{s}[{window}])) >= {count}"


def _feedback_traffic(window: str) -> str:
    """The minimum-feedback guard: the model got enough feedback in the window."""
    known = sel("gateway", 'model!="__unknown__"')
    rate = f"rate({GATEWAY_PREFIX}feedback_total{known}[{window}])"
    return f"sum by (model) ({rate}) > {number(c.FEEDBACK_MIN_RATE)}"


def slo_alerts(t: Timing) -> list[Alert]:
    """Multi-window multi-burn-rate alerts, one rule per tier, window labels removed first."""
    out = []
    for slo in c.SLOS:
        name, what = SLO_NAMES[slo.name]
        for tier in c.BURN_TIERS:
            thr = number(tier.factor * (1 - slo.objective))
            # the guard is a count of bad events in the long window, not a rate: a model with
            # little traffic that fails every request pages, 3 errors in an hour do not
            expr = (
                f"max without (window) ({sli_name(slo.name, tier.long)} > {thr})\n"
                f"and max without (window) ({sli_name(slo.name, tier.short)} > {thr})\n"
                f"and on (model) ({_bad_events(slo.name, tier.long, t)})"
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
                    f"{c.SLO_PERIOD} budget burns {number(tier.factor)}x too fast.",
                    symptom=True,
                    windowed=True,
                    labels={"slo": slo.name, "long_window": tier.long},
                )
            )
    return out


def _degraded(name: str, factor: float, floor: float) -> str:
    cur, base = quality_current(name), baseline(name)
    guard = number(floor * c.BASELINE_MIN_SHARE)
    return f"{cur} > {number(factor)} * clamp_min({base}, {guard})\nand {cur} > {number(floor)}\n"


def quality_alerts(t: Timing) -> list[Alert]:
    """Quality signals against a baseline that ends before the incident, with guards."""
    outputs = "request_output_tokens_count"
    out = []
    meta = {
        "empty_output": ("QualityEmptyOutputs", "empty outputs", "share of empty outputs"),
        "truncation": ("QualityTruncation", "outputs cut by max_new_tokens", "truncated share"),
        "repetition": ("QualityRepetition", "repetitive outputs", "mean repetition ratio"),
    }
    # the bad events a share counts: a share needs at least min_events of them
    bad = {
        "empty_output": ("empty_outputs_total", ""),
        "truncation": ("finish_reason_total", f'finish_reason="{FINISH_LENGTH}"'),
    }
    for d in c.DEGRADATIONS:
        name, what, measure = meta[d.name]
        expr = _degraded(d.name, d.factor, d.floor)
        expr += f"and on (model) {_traffic(t(d.window), outputs)}"
        if d.min_events:
            metric, extra = bad[d.name]
            expr += f"\nand on (model) {_min_events(metric, t(d.window), d.min_events, extra)}"
        out.append(
            Alert(
                name,
                expr,
                d.for_,
                "warning",
                f"A model produces more {what} than usual.",
                f"Model {{{{ $labels.model }}}}: {measure} is "
                f"{{{{ $value | humanizePercentage }}}} over {d.window}, above "
                f"{number(d.factor)}x its {c.BASELINE_WINDOW} baseline "
                f"(ending {c.BASELINE_OFFSET} ago) and above {number(d.floor)}.",
                symptom=True,
                windowed=True,
            )
        )
    cur, avg, std = quality_current("nll"), baseline("nll"), baseline("nll", "stddev")
    out.append(
        Alert(
            "QualityNllDrift",
            f"({cur} - {avg}) / clamp_min({std}, 0.01) > {number(c.NLL_Z)}\n"
            f"and {cur} - {avg} > {number(c.NLL_MIN_DELTA)}\n"
            f"and on (model) {_traffic(t(c.NLL_WINDOW), outputs)}",
            c.NLL_FOR,
            c.NLL_SEVERITY,
            "A model's mean per-token NLL drifted up from its baseline.",
            f"Model {{{{ $labels.model }}}}: mean NLL per output token is "
            f"{{{{ $value | humanize }}}} standard deviations above its {c.BASELINE_WINDOW} "
            f"baseline: the model is less sure of what it writes.",
            symptom=True,
            windowed=True,
        )
    )
    out.append(
        Alert(
            "QualityNegativeFeedback",
            _degraded("negative_feedback", c.FEEDBACK_FACTOR, c.FEEDBACK_FLOOR)
            + f"and on (model) {_feedback_traffic(t(c.FEEDBACK_WINDOW))}",
            c.FEEDBACK_FOR,
            "warning",
            "Users rate a model's answers negatively more often than usual.",
            f"Model {{{{ $labels.model }}}}: {{{{ $value | humanizePercentage }}}} of feedback "
            f"is negative over {c.FEEDBACK_WINDOW}, above {number(c.FEEDBACK_FACTOR)}x its "
            f"{c.BASELINE_WINDOW} baseline (ending {c.BASELINE_OFFSET} ago) and above "
            f"{number(c.FEEDBACK_FLOOR)}.",
            symptom=True,
            windowed=True,
        )
    )
    speed = quality_current("speed")
    out.append(
        Alert(
            "GatewayThroughputDrop",
            f"{speed} < {number(c.TOKENS_DROP_SHARE)} * {baseline('speed')}\n"
            f"and on (model) {_traffic(t(c.TOKENS_WINDOW))}",
            c.TOKENS_FOR,
            "warning",
            "A model generates tokens much more slowly than usual.",
            f"Model {{{{ $labels.model }}}}: {{{{ $value | humanize }}}} output tokens per "
            f"second of upstream time, under {number(c.TOKENS_DROP_SHARE * 100)}% of its "
            f"{c.BASELINE_WINDOW} baseline.",
            symptom=True,
            windowed=True,
        )
    )
    return out


def canary_alerts() -> list[Alert]:
    """Golden-prompt canaries per version, and canary vs stable."""
    ex = sel("exporter")
    return [
        Alert(
            "CanaryFailing",
            f"tokenpulse_canary_success{ex} == 0",
            c.CANARY_FOR,
            "warning",
            "Golden-prompt canaries get no answer from a model version.",
            "Model {{ $labels.model }} version {{ $labels.version }} did not answer every "
            "golden prompt in the exporter's last canary runs.",
            symptom=True,
            # the last run's result holds the outage until the next run: windowed
            windowed=True,
            per_replica=True,
        ),
        Alert(
            "CanaryMismatch",
            f"tokenpulse_canary_match{ex} == 0",
            c.CANARY_FOR,
            "warning",
            "A model version no longer reproduces its golden outputs.",
            "Model {{ $labels.model }} version {{ $labels.version }}: greedy answers to the "
            "golden prompts differ from the outputs recorded at export.",
            symptom=True,
            windowed=True,
            per_replica=True,
        ),
        Alert(
            "CanaryWorseThanStable",
            f"model:canary_mean_nll_nats:canary - model:canary_mean_nll_nats:stable"
            f" > {number(c.CANARY_NLL_MARGIN)}",
            c.CANARY_WORSE_FOR,
            "warning",
            "The canary version is less confident than the stable one on golden prompts.",
            "Model {{ $labels.model }}: the canary-labelled version's golden-prompt mean NLL is "
            '{{ $value | printf "%.2f" }} nats above the stable version\'s.',
        ),
    ]


def batching_alerts(t: Timing) -> list[Alert]:
    """TF Serving's batcher: batches of about one while calls are in flight to batch (fleet);
    a slow batch queue (per replica: one saturated replica would hide in the fleet's quantile)."""
    return [
        Alert(
            "TfServingBatchingIneffective",
            f"job:tfserving_batch_size:mean10m < {number(c.BATCH_SIZE_MIN)}\n"
            f"and on () {in_flight_per_replica(t(c.BATCH_WINDOW))}"
            f" >= {number(c.BATCH_IN_FLIGHT_MIN)}",
            c.BATCH_FOR,
            "warning",
            "TF Serving runs batches of about one request while several are in flight.",
            "Mean processed batch size is {{ $value | humanize }} over "
            f"{c.BATCH_WINDOW} while the gateway keeps at least {c.BATCH_IN_FLIGHT_MIN} predict "
            "calls in flight per replica: batching is not combining them.",
        ),
        Alert(
            "TfServingBatchQueueSlow",
            "instance:tfserving_batch_queuing_latency_seconds:p99_5m"
            f" > {number(c.BATCH_QUEUE_P99_S)}",
            c.BATCH_QUEUE_FOR,
            "warning",
            "Requests wait long in TF Serving's batch queue.",
            "p99 batch queueing latency of TF Serving at {{ $labels.instance }} is "
            "{{ $value | humanizeDuration }} (threshold "
            f"{number(c.BATCH_QUEUE_P99_S)} s).",
            per_replica=True,
        ),
    ]


def traffic_alerts(t: Timing) -> list[Alert]:
    """Traffic collapse against the same window a day and a week ago; gateway saturation."""
    day, week = t("1d"), t("7d")
    w = t(c.SATURATION_WINDOW)
    g = sel("gateway")
    share = number(c.TRAFFIC_COLLAPSE_SHARE)

    def rate(metric: str) -> str:
        return f"rate({GATEWAY_PREFIX}{metric}{g}[{w}])"

    shed = f"sum by (model) ({rate('shed_total')}) / sum by (model) ({rate('requests_total')})"
    wait = f"sum({rate('queue_wait_seconds_sum')}) / sum({rate('queue_wait_seconds_count')})"
    refused = sel("gateway", 'reason="max_connections"')
    refused_rate = f"rate({GATEWAY_PREFIX}connections_rejected_total{refused}[{w}])"
    return [
        Alert(
            "GatewayTrafficCollapse",
            f"{TRAFFIC_RATE} < {share} * ({TRAFFIC_RATE} offset {day})\n"
            f"and {TRAFFIC_RATE} < {share} * ({TRAFFIC_RATE} offset {week})\n"
            f"and ({TRAFFIC_RATE} offset {day}) > {number(c.MIN_REQUEST_RATE)}\n"
            f"and ({TRAFFIC_RATE} offset {week}) > {number(c.MIN_REQUEST_RATE)}",
            c.TRAFFIC_COLLAPSE_FOR,
            "warning",
            "A model gets far fewer requests than a day and a week ago.",
            'Model {{ $labels.model }}: {{ $value | printf "%.2g" }} requests/s over '
            f"{c.TRAFFIC_WINDOW}, under {number(c.TRAFFIC_COLLAPSE_SHARE * 100)}% of the same "
            "window a day and a week ago: callers may not reach the gateway.",
            symptom=True,
            windowed=True,
        ),
        Alert(
            "GatewaySaturated",
            f"({shed}) > {number(c.SHED_SHARE)}\n"
            f"or on () {wait} > {number(c.QUEUE_WAIT_S)}\n"
            f"or on () sum({refused_rate}) > {number(c.REJECTED_CONNECTIONS_RATE)}",
            c.SATURATION_FOR,
            "warning",
            "The gateway is saturated: it sheds requests, queues deeply or refuses connections.",
            "Over {{ with $labels.model }}model {{ . }}: {{ end }}the last "
            f"{c.SATURATION_WINDOW} the gateway shed over {number(c.SHED_SHARE * 100)}% of "
            f"requests, made them wait over {number(c.QUEUE_WAIT_S)} s on average for a "
            "concurrency slot or refused connections at max_connections (value "
            '{{ $value | printf "%.2g" }}).',
        ),
    ]


def all_alerts(t: Timing) -> list[Alert]:
    """Every alert, in file order."""
    return [
        *slo_alerts(t),
        *quality_alerts(t),
        *traffic_alerts(t),
        *canary_alerts(),
        *live_alerts(),
        *batching_alerts(t),
        *health_alerts(t),
        *meta_alerts(t),
    ]
