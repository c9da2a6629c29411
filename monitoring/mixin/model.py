"""The mixin's model: the alert type, the rule type and the names of recorded series.

Imported by the alert, health and recording-rule builders and by the rendering; imports none of
them, so the builders form no circle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from monitoring.mixin.config import MixinConfig
from monitoring.mixin.promql import Timing, seconds

# One recording rule or rendered alerting rule, as it goes into the YAML file.
Rule = dict[str, Any]

# Metric name prefixes (not job selectors: those come from cfg.jobs).
GATEWAY_PREFIX = "tokenpulse_gateway_"
# TF Serving's own metrics: colon names, microseconds, no version label.
TFSERVING_PREFIX = ":tensorflow:serving:"

# Component prefixes an alert name may start with (after TokenPulse); the Watchdog is its own.
ALERT_PREFIXES = (
    "Gateway", "Quality", "Canary", "TfServing", "Exporter", "Gpu", "Shipper", "Pipeline",
    "Training", "Prometheus", "Alertmanager",
)  # fmt: skip


@dataclass(frozen=True)
class Alert:
    """One alerting rule before rendering."""

    name: str  # after the TokenPulse prefix; starts with the component
    expr: str
    for_: str  # uncompressed; the compressed rule set divides it
    severity: str  # critical pages, warning goes to chat/tickets, info notifies nobody
    summary: str
    description: str
    # a symptom that a down model server (or a model with no AVAILABLE version) explains:
    # Alertmanager inhibits it while that cause fires
    symptom: bool = False
    # ... and a symptom read over a window (or from the last canary run), which the outage keeps
    # filling after it ends: also inhibited for cfg.recovery_window after a TfServingDown (or,
    # for its model, a NoAvailableVersion) page was sent, unless fresh failures follow (holds.py).
    # State alerts (a model with no AVAILABLE version) are never held past their cause: they show
    # the present, so a model server that comes back broken pages at once.
    windowed: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    # its series carry cfg.replica_label (one model-server replica's, or its exporter's):
    # inhibitions between such alerts hold that label equal
    per_replica: bool = False
    # Prometheus's keep_firing_for (2.42+): the alert keeps firing this long after its expression
    # stops matching, so a condition that comes and goes (a crash loop) stays one page
    keep_firing_for: str = ""
    # recording rules the expression reads, rendered just before the alert in its group: a
    # group evaluates its rules in order at one timestamp, each seeing what the ones before it
    # wrote (ALERTS_FOR_STATE of an earlier alert too); a record in another group would be read
    # one evaluation late
    records: tuple[Rule, ...] = ()

    @property
    def component(self) -> str:
        """The component prefix of the name, which picks the rule group (the Watchdog's own)."""
        return next((p for p in ALERT_PREFIXES if self.name.startswith(p)), self.name)

    def rule(self, cfg: MixinConfig, t: Timing) -> Rule:
        """The rule as it goes into the YAML file."""
        keep = {"keep_firing_for": t(self.keep_firing_for)} if self.keep_firing_for else {}
        # no `for` stays none when compressed: the floor is for waits, and a crash loop's short
        # compressed outages would not outlast a 5 s one
        alertname = cfg.alertname(self.name)
        return {
            "alert": alertname,
            "expr": self.expr,
            "for": t(self.for_) if seconds(self.for_) else self.for_,
            **keep,
            "labels": {"severity": self.severity, **self.labels},
            "annotations": {
                "summary": self.summary,
                "description": self.description,
                "runbook_url": cfg.links.runbook_url(alertname),
            },
        }


def slo_windows(cfg: MixinConfig) -> list[str]:
    """Every window a burn-rate tier uses, shortest first."""
    names = {w for t in cfg.burn_tiers for w in (t.long, t.short)}
    return sorted(names, key=seconds)


def sli_name(slo: str, window: str) -> str:
    """Recorded error ratio of one SLO over one (uncompressed) window."""
    what = {
        "availability": "errors",
        "latency": "slow_requests",
        "tpot": "slow_tokens",
        "ttft": "slow_first_tokens",
    }[slo]
    return f"model:gateway_{what}:ratio_rate{window}"


def quality_current(name: str) -> str:
    """Recorded current value of a degradation signal."""
    return {
        "empty_output": "model:gateway_empty_outputs:ratio_rate30m",
        "truncation": "model:gateway_truncated_outputs:ratio_rate30m",
        "repetition": "model:gateway_repetition_ratio:mean30m",
        "nll": "model:gateway_mean_nll_nats:mean30m",
        "speed": "model:gateway_output_tokens_per_upstream_second:ratio_rate30m",
        "negative_feedback": "model:gateway_negative_feedback:ratio_rate1h",
    }[name]


def baseline(name: str, op: str = "avg") -> str:
    """Recorded baseline (avg or stddev over the baseline window, a day ago) of a signal."""
    return f"{quality_current(name)}_{op}_over_time7d_offset1d"


# A model's request rate over cfg.traffic_window (0 when idle: a collapse is the point).
TRAFFIC_RATE = "model:gateway_requests:rate30m"
