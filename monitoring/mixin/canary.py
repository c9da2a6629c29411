"""The canary against the stable version on live traffic: per-version quality signals recorded.

The golden-prompt canaries (rules.canary_rules) cannot see a version exported broken: its golden
answers were recorded from itself. The gateway's outputs can. Each quality signal is recorded per
(model, version) over cfg.canary_live_window for the versions behind the stable and canary
labels, carrying a `version_label`; the alert fires when the canary is worse than stable by the
signal's margin while both served at least cfg.canary_live_min_outputs outputs in the window.
"""

from __future__ import annotations

from monitoring.mixin.config import MixinConfig
from monitoring.mixin.model import GATEWAY_PREFIX, Rule
from monitoring.mixin.promql import Timing
from monitoring.mixin.slis import ANSWERED, error_ratio
from tokenpulse.tfserving.signature import FINISH_LENGTH

TRUNCATED = f'finish_reason="{FINISH_LENGTH}"'

GROUP = "model, version"
BY = f"sum by ({GROUP})"
# Which version each label points at: {model, version, version_label}, value 1.
VERSION_LABEL = "model_version:tfserving_version_label:info"


def live_outputs(cfg: MixinConfig) -> str:
    """Recorded outputs per labelled version over cfg.canary_live_window."""
    return f"model_version:gateway_outputs:increase{cfg.canary_live_window}"


def live_signals(cfg: MixinConfig) -> dict[str, tuple[str, str, bool]]:
    """signal (a cfg.canary_live_margins key) -> (recorded name, what it measures, in nats)."""
    w = cfg.canary_live_window
    # the latency SLO's bound: what "slow" means for the SLI means it here too
    latency = cfg.slo("latency")
    return {
        "empty_output": (f"model_version:gateway_empty_outputs:ratio_rate{w}",
                         "share of empty outputs", False),
        "truncation": (f"model_version:gateway_truncated_outputs:ratio_rate{w}",
                       "share of outputs cut by max_new_tokens", False),
        "repetition": (f"model_version:gateway_repetition_ratio:mean{w}",
                       "mean repetition ratio", False),
        "nll": (f"model_version:gateway_mean_nll_nats:mean{w}", "mean NLL per output token",
                True),
        "latency": (f"model_version:gateway_slow_requests:ratio_rate{w}",
                    f"share of requests slower than {latency.threshold_le} s", False),
    }  # fmt: skip


def available_since(cfg: MixinConfig, indent: str) -> str:
    """When each AVAILABLE version of a model with two or more became AVAILABLE: what the
    stable and canary picks fall back on without labels (continuation lines `indent`ed)."""
    ex = cfg.sel("exporter")
    state = cfg.sel("exporter", 'state="AVAILABLE"')
    available = f"tokenpulse_tfserving_model_version_state{state} == 1"
    return (
        f"tokenpulse_tfserving_model_version_state_change_timestamp_seconds{ex}\n"
        f"{indent}and on (model, version) ({available})\n"
        f"{indent}and on (model) (count by (model) ({available}) >= 2)"
    )


def _versions(cfg: MixinConfig, label: str, pick: str) -> str:
    """{model, version} of the version behind `label`; without the label in the model config,
    with two or more AVAILABLE versions, the one `pick` (topk: newest, bottomk: oldest) chooses
    by when it became AVAILABLE (as rules.canary_rules). One version per model: topk settles
    exporters (one per replica) that disagree for a moment while the config changes."""
    which = cfg.sel("exporter", f'label="{label}"')
    since = available_since(cfg, "    ")
    labels = f"tokenpulse_tfserving_model_label_version{which}"
    labelled = f'count_values by (model) ("version", {labels})'
    return (
        f"group by (model, version) (topk by (model) (1, {labelled}))\n"
        f"  or on (model) group by (model, version) ({pick} by (model) (1,\n    {since}\n  ))"
    )


def _version_label_rule(cfg: MixinConfig) -> Rule:
    # a version behind both labels (a canary promoted before its label was removed) is stable
    # only: nothing to compare, and every per-version join stays one-to-one
    stable, canary = (
        f'label_replace(\n  {_versions(cfg, label, pick)},\n  "version_label", "{label}", "", ""\n)'
        for label, pick in (("stable", "bottomk"), ("canary", "topk"))
    )
    return {
        "record": VERSION_LABEL,
        "expr": f"{stable}\nor\n(\n{canary}\nunless on (model, version)\n{stable}\n)",
    }


def live_rules(cfg: MixinConfig, t: Timing) -> list[Rule]:
    """The version-label map, then each signal and the outputs per labelled version."""
    w = t(cfg.canary_live_window)

    def rate(metric: str, extra: str = "") -> str:
        s = cfg.sel("gateway", extra)
        return f"{BY} (rate({GATEWAY_PREFIX}{metric}{s}[{w}]))"

    def labelled(expr: str) -> str:
        return f"(\n  {expr}\n)\n* on (model, version) group_left (version_label) {VERSION_LABEL}"

    def share(bad: str, total: str) -> str:
        # a version whose bad counter is not there yet (created with its first event) has 0;
        # an idle version has no share at all (`> 0`), not NaN
        return f"({bad} or {total} * 0)\n  / ({total} > 0)"

    def mean(histogram: str) -> str:
        return f"{rate(f'{histogram}_sum')}\n  / ({rate(f'{histogram}_count')} > 0)"

    slow = error_ratio(cfg, cfg.slo("latency"), w, cfg.jobs.selector("gateway"), GROUP)
    outputs = rate("request_output_tokens_count")
    finished = rate("finish_reason_total")
    exprs = {
        "empty_output": share(rate("empty_outputs_total"), outputs),
        "truncation": share(rate("finish_reason_total", TRUNCATED), finished),
        "repetition": mean("repetition_ratio"),
        "nll": mean("mean_nll_nats"),
        # the latency SLI per version (answered requests only), while they arrive
        "latency": f"{slow}\n  and {rate('request_duration_seconds_count', ANSWERED)} > 0",
    }
    gw = cfg.sel("gateway")
    count = f"{BY} (increase({GATEWAY_PREFIX}request_output_tokens_count{gw}[{w}]))"
    names = live_signals(cfg)
    rules = [_version_label_rule(cfg), {"record": live_outputs(cfg), "expr": labelled(count)}]
    rules += [{"record": names[n][0], "expr": labelled(e)} for n, e in exprs.items()]
    return rules
