"""Output-quality alerts: each signal against its own baseline, which ends before the incident.

Empty, truncated and repetitive outputs, the mean per-token NLL and negative feedback, each with
a floor and a traffic (or bad-event) guard, so a handful of bad outputs among few does not fire.
"""

from __future__ import annotations

from monitoring.mixin.alerts.common import min_events, traffic
from monitoring.mixin.config import MixinConfig
from monitoring.mixin.model import GATEWAY_PREFIX, Alert, baseline, quality_current
from monitoring.mixin.promql import Timing, number
from tokenpulse.tfserving.signature import FINISH_LENGTH


def degraded(cfg: MixinConfig, name: str, factor: float, floor: float) -> str:
    cur, base = quality_current(name), baseline(name)
    guard = number(floor * cfg.baseline_min_share)
    return f"{cur} > {number(factor)} * clamp_min({base}, {guard})\nand {cur} > {number(floor)}\n"


def _feedback_traffic(cfg: MixinConfig, window: str) -> str:
    """The minimum-feedback guard: the model got enough feedback in the window."""
    known = cfg.sel("gateway", 'model!="__unknown__"')
    rate = f"rate({GATEWAY_PREFIX}feedback_total{known}[{window}])"
    return f"sum by (model) ({rate}) > {number(cfg.feedback_min_rate)}"


def alerts(cfg: MixinConfig, t: Timing) -> list[Alert]:
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
    for d in cfg.degradations:
        name, what, measure = meta[d.name]
        expr = degraded(cfg, d.name, d.factor, d.floor)
        expr += f"and on (model) {traffic(cfg, t(d.window), outputs)}"
        if d.min_events:
            metric, extra = bad[d.name]
            expr += f"\nand on (model) {min_events(cfg, metric, t(d.window), d.min_events, extra)}"
        out.append(
            Alert(
                name,
                expr,
                d.for_,
                "warning",
                f"A model produces more {what} than usual.",
                f"Model {{{{ $labels.model }}}}: {measure} is "
                f"{{{{ $value | humanizePercentage }}}} over {d.window}, above "
                f"{number(d.factor)}x its {cfg.baseline_window} baseline "
                f"(ending {cfg.baseline_offset} ago) and above {number(d.floor)}.",
                symptom=True,
                windowed=True,
            )
        )
    cur, avg, std = quality_current("nll"), baseline("nll"), baseline("nll", "stddev")
    out.append(
        Alert(
            "QualityNllDrift",
            f"({cur} - {avg}) / clamp_min({std}, 0.01) > {number(cfg.nll_z)}\n"
            f"and {cur} - {avg} > {number(cfg.nll_min_delta)}\n"
            f"and on (model) {traffic(cfg, t(cfg.nll_window), outputs)}",
            cfg.nll_for,
            cfg.nll_severity,
            "A model's mean per-token NLL drifted up from its baseline.",
            f"Model {{{{ $labels.model }}}}: mean NLL per output token is "
            f"{{{{ $value | humanize }}}} standard deviations above its {cfg.baseline_window} "
            f"baseline: the model is less sure of what it writes.",
            symptom=True,
            windowed=True,
        )
    )
    out.append(
        Alert(
            "QualityNegativeFeedback",
            degraded(cfg, "negative_feedback", cfg.feedback_factor, cfg.feedback_floor)
            + f"and on (model) {_feedback_traffic(cfg, t(cfg.feedback_window))}",
            cfg.feedback_for,
            "warning",
            "Users rate a model's answers negatively more often than usual.",
            f"Model {{{{ $labels.model }}}}: {{{{ $value | humanizePercentage }}}} of feedback "
            f"is negative over {cfg.feedback_window}, above {number(cfg.feedback_factor)}x its "
            f"{cfg.baseline_window} baseline (ending {cfg.baseline_offset} ago) and above "
            f"{number(cfg.feedback_floor)}.",
            symptom=True,
            windowed=True,
        )
    )
    return out
