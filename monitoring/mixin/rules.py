"""Recording rules (`level:metric:operations`) and the rule files, from the mixin config.

TF Serving's histograms are in microseconds with colon names and no version label; they become
per-model seconds. Availability comes from the gateway (TF Serving's request_count also counts the
status GETs of the gateway and exporter, and has no API label). The gateway's series become
per-model SLIs over every burn-rate window, each carrying a `window` label that alerts remove
before joining, and quality signals with baselines that end a day ago.
"""

from __future__ import annotations

from typing import Any

import yaml

from monitoring.mixin import config
from monitoring.mixin.promql import COMPRESSED, NORMAL, Timing, sel

Rule = dict[str, Any]
TFS = ":tensorflow:serving:"
GW = "tokenpulse_gateway_"
BY_MODEL = "sum by (model)"


def slo_windows() -> list[str]:
    """Every window a burn-rate tier uses, shortest first."""
    from monitoring.mixin.promql import seconds

    names = {w for t in config.BURN_TIERS for w in (t.long, t.short)}
    return sorted(names, key=seconds)


def sli_name(slo: str, window: str) -> str:
    """Recorded error ratio of one SLO over one (uncompressed) window."""
    what = {"availability": "errors", "latency": "slow_requests", "tpot": "slow_tokens"}[slo]
    return f"model:gateway_{what}:ratio_rate{window}"


def _to_model(expr: str) -> str:
    """Rename TF Serving's model_name label to model."""
    return f'sum without (model_name) (label_replace({expr}, "model", "$1", "model_name", "(.*)"))'


def tfserving_rules(t: Timing) -> list[Rule]:
    """Seconds-based per-model latency and the server-wide batching SLIs."""
    w = t("5m")
    predict = sel("modelserver", 'API="predict"')
    lat = f"{TFS}request_latency"
    b = f"{TFS}batching_session:"
    bw = t(config.BATCH_WINDOW)
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
            "expr": f"sum by (job) (rate({b}processed_batch_size_sum{sel('modelserver')}[{bw}]))"
            f" / sum by (job) (rate({b}processed_batch_size_count{sel('modelserver')}[{bw}]))",
        },
        {
            "record": "job:tfserving_batch_queuing_latency_seconds:p99_5m",
            "expr": f"histogram_quantile(0.99, sum by (job, le)"
            f" (rate({b}queuing_latency_bucket{sel('modelserver')}[{w}]))) / 1e6",
        },
    ]


def _ratio(bad: str, total: str) -> str:
    # `or ... * 0`: a model with traffic and no bad events records 0, not nothing
    return f"({BY_MODEL} ({bad}) or {BY_MODEL} ({total}) * 0) / {BY_MODEL} ({total})"


def sli_rules(t: Timing) -> list[Rule]:
    """Error ratios of every SLO over every burn-rate window, per model, labelled `window`."""
    g = sel("gateway")
    ok = sel("gateway", 'code=~"2.."')
    bad = sel("gateway", f'code=~"{config.ERROR_CODES}"')
    by_slo = {s.name: s for s in config.SLOS}
    rules: list[Rule] = []
    for window in slo_windows():
        w = t(window)
        req = f"rate({GW}requests_total{g}[{w}])"
        err = f"rate({GW}requests_total{bad}[{w}])"
        dur = f"{GW}request_duration_seconds"
        tpot = f"{GW}time_per_output_token_seconds"
        lat_le = by_slo["latency"].threshold_le
        tpot_le = by_slo["tpot"].threshold_le
        exprs = {
            "availability": _ratio(err, req),
            "latency": f'1 - {BY_MODEL} (rate({dur}_bucket{{{ok[1:-1]},le="{lat_le}"}}[{w}]))'
            f" / {BY_MODEL} (rate({dur}_count{ok}[{w}]))",
            "tpot": f'1 - {BY_MODEL} (rate({tpot}_bucket{{{g[1:-1]},le="{tpot_le}"}}[{w}]))'
            f" / {BY_MODEL} (rate({tpot}_count{g}[{w}]))",
        }
        for slo in config.SLOS:
            rules.append(
                {
                    "record": sli_name(slo.name, window),
                    "expr": exprs[slo.name],
                    "labels": {"window": window},
                }
            )
    return rules


def quality_current(name: str) -> str:
    """Recorded current value of a degradation signal."""
    return {
        "empty_output": "model:gateway_empty_outputs:ratio_rate30m",
        "truncation": "model:gateway_truncated_outputs:ratio_rate30m",
        "repetition": "model:gateway_repetition_ratio:mean30m",
        "nll": "model:gateway_mean_nll_nats:mean30m",
        "speed": "model:gateway_output_tokens_per_upstream_second:ratio_rate30m",
    }[name]


def baseline(name: str, op: str = "avg") -> str:
    """Recorded baseline (avg or stddev over the baseline window, a day ago) of a signal."""
    return f"{quality_current(name)}_{op}_over_time7d_offset1d"


def quality_rules(t: Timing) -> list[Rule]:
    """Current quality signals per model and their baselines."""
    g = sel("gateway")
    by_name = {d.name: d for d in config.DEGRADATIONS}

    def rate(metric: str, window: str, extra: str = "") -> str:
        s = sel("gateway", extra) if extra else g
        return f"rate({GW}{metric}{s}[{t(window)}])"

    outputs = "request_output_tokens_count"
    current = {
        "empty_output": _ratio(
            rate("empty_outputs_total", by_name["empty_output"].window),
            rate(outputs, by_name["empty_output"].window),
        ),
        "truncation": _ratio(
            rate("finish_reason_total", by_name["truncation"].window, 'finish_reason="length"'),
            rate("finish_reason_total", by_name["truncation"].window),
        ),
        "repetition": f"{BY_MODEL} ({rate('repetition_ratio_sum', by_name['repetition'].window)})"
        f" / {BY_MODEL} ({rate('repetition_ratio_count', by_name['repetition'].window)})",
        "nll": f"{BY_MODEL} ({rate('mean_nll_nats_sum', config.NLL_WINDOW)})"
        f" / {BY_MODEL} ({rate('mean_nll_nats_count', config.NLL_WINDOW)})",
        "speed": f"{BY_MODEL} ({rate('output_tokens_total', config.TOKENS_WINDOW)})"
        f" / {BY_MODEL} ({rate('upstream_duration_seconds_sum', config.TOKENS_WINDOW)})",
    }
    window, offset = t(config.BASELINE_WINDOW), t(config.BASELINE_OFFSET)
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


def canary_rules() -> list[Rule]:
    """Golden-prompt mean NLL of the versions behind the stable and canary labels, per model.

    count_values turns the label's version number into a `version` label to join on.
    """
    out = []
    for label in ("stable", "canary"):
        which = sel("exporter", f'label="{label}"')
        versions = (
            f'count_values by (model) ("version", tokenpulse_tfserving_model_label_version{which})'
        )
        out.append(
            {
                "record": f"model:canary_mean_nll_nats:{label}",
                "expr": f"max by (model) (tokenpulse_canary_mean_nll_nats{sel('exporter')}"
                f" and on (model, version) {versions})",
            }
        )
    return out


def recording_groups(t: Timing) -> list[dict[str, Any]]:
    """Every recording-rule group."""
    return [
        {"name": "tokenpulse-tfserving.rules", "rules": tfserving_rules(t)},
        {"name": "tokenpulse-slis.rules", "rules": sli_rules(t)},
        {"name": "tokenpulse-quality.rules", "rules": quality_rules(t)},
        {"name": "tokenpulse-canary.rules", "rules": canary_rules()},
    ]


HEADER = (
    "# Generated by `tokenpulse build monitoring` from monitoring/mixin/config.py; do not edit.\n"
    "# Change thresholds and windows in the config, then regenerate.\n"
)


def _dump(groups: list[dict[str, Any]], note: str = "") -> str:
    return HEADER + note + yaml.safe_dump({"groups": groups}, sort_keys=False, width=100)


def render_files(compressed: bool = False) -> dict[str, str]:
    """File name -> YAML of the recording and alerting rule files."""
    from monitoring.mixin.alerts import alert_groups

    t = COMPRESSED if compressed else NORMAL
    note = ""
    if compressed:
        note = (
            f"# TIME-COMPRESSED for tests: every window, offset and `for` divided by "
            f"{config.COMPRESSION_FACTOR}. Rule names keep their uncompressed windows.\n"
        )
    return {
        "recording.rules.yml": _dump(recording_groups(t), note),
        "alerts.rules.yml": _dump(alert_groups(t), note),
    }
