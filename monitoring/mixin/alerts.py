"""Alerting rules from the mixin config: SLO burn rates, degradation, health.

Every alert gets `for`, `severity`, a static summary, a templated description and a runbook URL
from config.RUNBOOK_URL_PATTERN; `symptom=True` marks alerts that a down model server (or a model
with no AVAILABLE version) explains, which Alertmanager then inhibits.
"""

from __future__ import annotations

from monitoring.mixin import config as c
from monitoring.mixin.health import health_alerts
from monitoring.mixin.model import GATEWAY_PREFIX, Alert, baseline, quality_current, sli_name
from monitoring.mixin.promql import Timing, number, sel

SLO_NAMES = {
    "availability": ("GatewayAvailabilityBudgetBurn", "answering with server errors"),
    "latency": ("GatewayLatencyBudgetBurn", "answering too slowly end to end"),
    "tpot": ("GatewayTokenLatencyBudgetBurn", "generating too slowly per output token"),
}


def _traffic(window: str, metric: str = "requests_total") -> str:
    """The minimum-traffic guard: the model had requests in the window."""
    rate = f"rate({GATEWAY_PREFIX}{metric}{sel('gateway')}[{window}])"
    return f"sum by (model) ({rate}) > {c.MIN_REQUEST_RATE}"


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
            expr = (
                f"max without (window) ({sli_name(slo.name, tier.long)} > {thr})\n"
                f"and max without (window) ({sli_name(slo.name, tier.short)} > {thr})\n"
                f"and on (model) {_traffic(t(tier.long))}"
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
    for d in c.DEGRADATIONS:
        name, what, measure = meta[d.name]
        out.append(
            Alert(
                name,
                _degraded(d.name, d.factor, d.floor)
                + f"and on (model) {_traffic(t(d.window), outputs)}",
                d.for_,
                "warning",
                f"A model produces more {what} than usual.",
                f"Model {{{{ $labels.model }}}}: {measure} is "
                f"{{{{ $value | humanizePercentage }}}} over {d.window}, above "
                f"{number(d.factor)}x its {c.BASELINE_WINDOW} baseline "
                f"(ending {c.BASELINE_OFFSET} ago) and above {number(d.floor)}.",
                symptom=True,
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
            "info",
            "A model's mean per-token NLL drifted up from its baseline.",
            f"Model {{{{ $labels.model }}}}: mean NLL per output token is "
            f"{{{{ $value | humanize }}}} standard deviations above its {c.BASELINE_WINDOW} "
            f"baseline: the model is less sure of what it writes.",
            symptom=True,
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
    """TF Serving's batcher: batches of about one while requests queue (fleet: the gateway's queue
    feeds every replica); a slow batch queue (per replica: one saturated replica would hide in
    the fleet's quantile)."""
    queued = f"avg_over_time({GATEWAY_PREFIX}queued_requests{sel('gateway')}[{t(c.BATCH_WINDOW)}])"
    return [
        Alert(
            "TfServingBatchingIneffective",
            f"job:tfserving_batch_size:mean10m < {number(c.BATCH_SIZE_MIN)}\n"
            f"and on () sum({queued}) >= {number(c.BATCH_QUEUED_MIN)}",
            c.BATCH_FOR,
            "warning",
            "TF Serving runs batches of about one request while requests queue.",
            "Mean processed batch size is {{ $value | humanize }} over "
            f"{c.BATCH_WINDOW} while the gateway queues requests: batching is not helping.",
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


def all_alerts(t: Timing) -> list[Alert]:
    """Every alert, in file order."""
    return [
        *slo_alerts(t),
        *quality_alerts(t),
        *canary_alerts(),
        *batching_alerts(t),
        *health_alerts(t),
    ]
