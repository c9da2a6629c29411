"""Recording rules (`level:metric:operations`) from the mixin config.

TF Serving's histograms are in microseconds with colon names and no version label; they become
per-model seconds, summed over every replica (the fleet); batching is recorded per fleet and per
replica too (`instance:`, keeping the replica label), since each replica forms its own batches.
Availability comes from the gateway (TF Serving's request_count also counts the status GETs of
the gateway and exporter, and has no API label). The gateway's series become per-model SLIs over
every burn-rate window, each carrying a `window` label that alerts remove before joining, and
quality signals with baselines that end a day ago.
"""

from __future__ import annotations

from typing import Any

from monitoring.mixin.canary import available_since, live_rules
from monitoring.mixin.config import MixinConfig
from monitoring.mixin.model import (
    GATEWAY_PREFIX,
    TFSERVING_PREFIX,
    TRAFFIC_RATE,
    Rule,
    baseline,
    quality_current,
    sli_name,
    slo_windows,
)
from monitoring.mixin.promql import Timing
from monitoring.mixin.slis import error_ratio, share
from tokenpulse.tfserving.signature import FINISH_LENGTH

BY_MODEL = "sum by (model)"


def _to_model(expr: str) -> str:
    """Rename TF Serving's model_name label to model."""
    return f'sum without (model_name) (label_replace({expr}, "model", "$1", "model_name", "(.*)"))'


def tfserving_rules(cfg: MixinConfig, t: Timing) -> list[Rule]:
    """Seconds-based per-model latency over the fleet; batching SLIs per fleet and per replica."""
    w = t("5m")
    predict = cfg.sel("modelserver", 'API="predict"')
    lat = f"{TFSERVING_PREFIX}request_latency"
    b = f"{TFSERVING_PREFIX}batching_session:"
    bw = t(cfg.batch_window)
    ms = cfg.sel("modelserver")
    replica = f"job, instance, {cfg.replica_label}"
    return [
        {
            "record": "model:tfserving_predict_requests:rate5m",
            "expr": _to_model(f"sum by (model_name) (rate({lat}_count{predict}[{w}]))"),
        },
        {
            "record": "model:tfserving_request_latency_seconds:mean5m",
            "expr": _to_model(
                f"sum by (model_name) (rate({lat}_sum{predict}[{w}]))"
                f" / sum by (model_name) (rate({lat}_count{predict}[{w}])) / 1e6"
            ),
        },
        {
            "record": "model:tfserving_request_latency_seconds:p99_5m",
            "expr": _to_model(
                f"histogram_quantile(0.99, sum by (model_name, le)"
                f" (rate({lat}_bucket{predict}[{w}]))) / 1e6"
            ),
        },
        {
            "record": "job:tfserving_batch_size:mean10m",
            "expr": f"sum by (job) (rate({b}processed_batch_size_sum{ms}[{bw}]))"
            f" / sum by (job) (rate({b}processed_batch_size_count{ms}[{bw}]))",
        },
        {
            "record": "job:tfserving_batch_queuing_latency_seconds:p99_5m",
            "expr": f"histogram_quantile(0.99, sum by (job, le)"
            f" (rate({b}queuing_latency_bucket{ms}[{w}]))) / 1e6",
        },
        {
            "record": "instance:tfserving_batch_size:mean10m",
            "expr": f"sum by ({replica}) (rate({b}processed_batch_size_sum{ms}"
            f"[{bw}]))\n/ sum by ({replica}) (rate({b}processed_batch_size_count"
            f"{ms}[{bw}]))",
        },
        {
            "record": "instance:tfserving_batch_queuing_latency_seconds:p99_5m",
            "expr": f"histogram_quantile(0.99, sum by ({replica}, le)"
            f" (rate({b}queuing_latency_bucket{ms}[{w}]))) / 1e6",
        },
    ]


def sli_rules(cfg: MixinConfig, t: Timing) -> list[Rule]:
    """Error ratios of every SLO over every burn-rate window, per model, labelled `window`."""
    job = cfg.jobs.selector("gateway")
    return [
        {
            "record": sli_name(slo.name, window),
            "expr": error_ratio(cfg, slo, t(window), job),
            "labels": {"window": window},
        }
        for window in slo_windows(cfg)
        for slo in cfg.slos
    ]


def quality_rules(cfg: MixinConfig, t: Timing) -> list[Rule]:
    """Current quality signals per model and their baselines."""
    g = cfg.sel("gateway")
    by_name = {d.name: d for d in cfg.degradations}

    def rate(metric: str, window: str, extra: str = "") -> str:
        s = cfg.sel("gateway", extra) if extra else g
        return f"rate({GATEWAY_PREFIX}{metric}{s}[{t(window)}])"

    outputs = "request_output_tokens_count"
    truncated = f'finish_reason="{FINISH_LENGTH}"'
    # the events each signal is a share or mean of: at zero traffic it is recorded as nothing
    # (`> 0`), not NaN, so an idle half-hour is a gap that avg_over_time and stddev_over_time
    # skip instead of a NaN that poisons the 7-day baselines for a week
    events = {
        "empty_output": rate(outputs, by_name["empty_output"].window),
        "truncation": rate("finish_reason_total", by_name["truncation"].window),
        "repetition": rate("repetition_ratio_count", by_name["repetition"].window),
        "nll": rate("mean_nll_nats_count", cfg.nll_window),
        "speed": rate("upstream_duration_seconds_sum", cfg.tokens_window),
    }
    current = {
        "empty_output": share(
            rate("empty_outputs_total", by_name["empty_output"].window),
            rate(outputs, by_name["empty_output"].window),
        ),
        "truncation": share(
            rate("finish_reason_total", by_name["truncation"].window, truncated),
            rate("finish_reason_total", by_name["truncation"].window),
        ),
        "repetition": f"{BY_MODEL} ({rate('repetition_ratio_sum', by_name['repetition'].window)})"
        f" / {BY_MODEL} ({rate('repetition_ratio_count', by_name['repetition'].window)})",
        "nll": f"{BY_MODEL} ({rate('mean_nll_nats_sum', cfg.nll_window)})"
        f" / {BY_MODEL} ({rate('mean_nll_nats_count', cfg.nll_window)})",
        "speed": f"{BY_MODEL} ({rate('output_tokens_total', cfg.tokens_window)})"
        f" / {BY_MODEL} ({rate('upstream_duration_seconds_sum', cfg.tokens_window)})",
    }
    # only while feedback arrives (`> 0`): an idle night is a gap in the baseline, not a NaN;
    # feedback on responses the gateway no longer knew (model __unknown__) is no model's
    known = 'model!="__unknown__"'
    feedback = rate("feedback_total", cfg.feedback_window, known)
    negative = rate("feedback_total", cfg.feedback_window, f'{known},score_class="negative"')
    negatives = f"({BY_MODEL} ({negative}) or {BY_MODEL} ({feedback}) * 0)"
    current = {n: f"{e}\nand on (model) ({BY_MODEL} ({events[n]}) > 0)" for n, e in current.items()}
    current["negative_feedback"] = f"{negatives}\n/ ({BY_MODEL} ({feedback}) > 0)"
    window, offset = t(cfg.baseline_window), t(cfg.baseline_offset)
    rules: list[Rule] = [{"record": quality_current(n), "expr": e} for n, e in current.items()]
    for name in current:
        rules.append(
            {
                "record": baseline(name),
                "expr": f"avg_over_time({quality_current(name)}[{window}] offset {offset})",
            }
        )
    rules.append(
        {
            "record": baseline("nll", "stddev"),
            "expr": f"stddev_over_time({quality_current('nll')}[{window}] offset {offset})",
        }
    )
    return rules


def traffic_rules(cfg: MixinConfig, t: Timing) -> list[Rule]:
    """Each model's request rate, zero when idle (the traffic-collapse alert compares it)."""
    requests = f"rate({GATEWAY_PREFIX}requests_total{cfg.sel('gateway')}[{t(cfg.traffic_window)}])"
    return [{"record": TRAFFIC_RATE, "expr": f"{BY_MODEL} ({requests})"}]


def canary_rules(cfg: MixinConfig) -> list[Rule]:
    """Golden-prompt mean NLL of the versions behind the stable and canary labels, per model.

    count_values turns the label's version number into a `version` label to join on. A model
    whose config has no such label (the shipped configs have none: a rollout there is
    `latest { num_versions: 2 }`) falls back to what a rollout means without labels: with two or
    more AVAILABLE versions, the one that became AVAILABLE last is the canary and the one that
    did first is stable (the gateway sends unlabelled traffic to the newest).
    """
    ex = cfg.sel("exporter")
    since = available_since(cfg, "  ")
    pick = {"stable": "bottomk", "canary": "topk"}
    out = []
    for label in ("stable", "canary"):
        which = cfg.sel("exporter", f'label="{label}"')
        versions = (
            f'count_values by (model) ("version", tokenpulse_tfserving_model_label_version{which})'
        )
        fallback = f"{pick[label]} by (model) (1,\n  {since}\n)"
        out.append(
            {
                "record": f"model:canary_mean_nll_nats:{label}",
                "expr": f"max by (model) (\n  tokenpulse_canary_mean_nll_nats{ex}\n"
                f"  and on (model, version) ({versions}\n  or on (model) {fallback})\n)",
            }
        )
    return out


def recording_groups(cfg: MixinConfig, t: Timing) -> list[dict[str, Any]]:
    """Every recording-rule group."""
    return [
        {"name": "tokenpulse-tfserving.rules", "rules": tfserving_rules(cfg, t)},
        {"name": "tokenpulse-slis.rules", "rules": sli_rules(cfg, t)},
        {
            "name": "tokenpulse-quality.rules",
            "rules": quality_rules(cfg, t) + traffic_rules(cfg, t),
        },
        {"name": "tokenpulse-canary.rules", "rules": canary_rules(cfg) + live_rules(cfg, t)},
    ]
