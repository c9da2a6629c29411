"""The canary against the stable version on live traffic: per-version quality, one alert per signal.

The golden-prompt canaries (rules.canary_rules) cannot see a version exported broken: its golden
answers were recorded from itself. The gateway's outputs can. Each quality signal is recorded per
(model, version) over config.CANARY_LIVE_WINDOW for the versions behind the stable and canary
labels, carrying a `version_label`; the alert fires when the canary is worse than stable by the
signal's margin while both served at least config.CANARY_LIVE_MIN_OUTPUTS outputs in the window.
"""

from __future__ import annotations

from monitoring.mixin import config as c
from monitoring.mixin.model import GATEWAY_PREFIX, Alert, Rule
from monitoring.mixin.promql import Timing, number, sel
from monitoring.mixin.slis import ANSWERED, error_ratio
from tokenpulse.tfserving.signature import FINISH_LENGTH

TRUNCATED = f'finish_reason="{FINISH_LENGTH}"'
# the latency SLO's bound: what "slow" means for the SLI means it here too
LATENCY = next(slo for slo in c.SLOS if slo.name == "latency")
AVAILABLE = sel("exporter", 'state="AVAILABLE"')

GROUP = "model, version"
BY = f"sum by ({GROUP})"
W = c.CANARY_LIVE_WINDOW
# Which version each label points at: {model, version, version_label}, value 1.
VERSION_LABEL = "model_version:tfserving_version_label:info"
OUTPUTS = f"model_version:gateway_outputs:increase{W}"
# signal (a config.CANARY_LIVE_MARGINS key) -> (recorded name, what it measures, in nats or not)
SIGNALS = {
    "empty_output": (f"model_version:gateway_empty_outputs:ratio_rate{W}",
                     "share of empty outputs", False),
    "truncation": (f"model_version:gateway_truncated_outputs:ratio_rate{W}",
                   "share of outputs cut by max_new_tokens", False),
    "repetition": (f"model_version:gateway_repetition_ratio:mean{W}",
                   "mean repetition ratio", False),
    "nll": (f"model_version:gateway_mean_nll_nats:mean{W}", "mean NLL per output token", True),
    "latency": (f"model_version:gateway_slow_requests:ratio_rate{W}",
                f"share of requests slower than {LATENCY.threshold_le} s", False),
}  # fmt: skip


def _versions(label: str, pick: str) -> str:
    """{model, version} of the version behind `label`; without the label in the model config,
    with two or more AVAILABLE versions, the one `pick` (topk: newest, bottomk: oldest) chooses
    by when it became AVAILABLE (as rules.canary_rules). One version per model: topk settles
    exporters (one per replica) that disagree for a moment while the config changes."""
    ex = sel("exporter")
    which = sel("exporter", f'label="{label}"')
    available = f"tokenpulse_tfserving_model_version_state{AVAILABLE} == 1"
    since = (
        f"tokenpulse_tfserving_model_version_state_change_timestamp_seconds{ex}\n"
        f"    and on (model, version) ({available})\n"
        f"    and on (model) (count by (model) ({available}) >= 2)"
    )
    labels = f"tokenpulse_tfserving_model_label_version{which}"
    labelled = f'count_values by (model) ("version", {labels})'
    return (
        f"group by (model, version) (topk by (model) (1, {labelled}))\n"
        f"  or on (model) group by (model, version) ({pick} by (model) (1,\n    {since}\n  ))"
    )


def _version_label_rule() -> Rule:
    # a version behind both labels (a canary promoted before its label was removed) is stable
    # only: nothing to compare, and every per-version join stays one-to-one
    stable, canary = (
        f'label_replace(\n  {_versions(label, pick)},\n  "version_label", "{label}", "", ""\n)'
        for label, pick in (("stable", "bottomk"), ("canary", "topk"))
    )
    return {
        "record": VERSION_LABEL,
        "expr": f"{stable}\nor\n(\n{canary}\nunless on (model, version)\n{stable}\n)",
    }


def live_rules(t: Timing) -> list[Rule]:
    """The version-label map, then each signal and the outputs per labelled version."""
    w = t(c.CANARY_LIVE_WINDOW)

    def rate(metric: str, extra: str = "") -> str:
        s = sel("gateway", extra) if extra else sel("gateway")
        return f"{BY} (rate({GATEWAY_PREFIX}{metric}{s}[{w}]))"

    def labelled(expr: str) -> str:
        return f"(\n  {expr}\n)\n* on (model, version) group_left (version_label) {VERSION_LABEL}"

    def share(bad: str, total: str) -> str:
        # a version whose bad counter is not there yet (created with its first event) has 0;
        # an idle version has no share at all (`> 0`), not NaN
        return f"({bad} or {total} * 0)\n  / ({total} > 0)"

    def mean(histogram: str) -> str:
        return f"{rate(f'{histogram}_sum')}\n  / ({rate(f'{histogram}_count')} > 0)"

    outputs = rate("request_output_tokens_count")
    finished = rate("finish_reason_total")
    exprs = {
        "empty_output": share(rate("empty_outputs_total"), outputs),
        "truncation": share(rate("finish_reason_total", TRUNCATED), finished),
        "repetition": mean("repetition_ratio"),
        "nll": mean("mean_nll_nats"),
        # the latency SLI per version (answered requests only), while they arrive
        "latency": f"{error_ratio(LATENCY, w, c.JOBS.selector('gateway'), GROUP)}\n  and "
        f"{rate('request_duration_seconds_count', ANSWERED)} > 0",
    }
    count = f"{BY} (increase({GATEWAY_PREFIX}request_output_tokens_count{sel('gateway')}[{w}]))"
    rules = [_version_label_rule(), {"record": OUTPUTS, "expr": labelled(count)}]
    rules += [{"record": SIGNALS[n][0], "expr": labelled(e)} for n, e in exprs.items()]
    return rules


def live_alerts() -> list[Alert]:
    """One rule per signal: the canary-labelled version worse than the stable-labelled one
    (recorded series only, so the windows are the recording rules')."""
    n = c.CANARY_LIVE_MIN_OUTPUTS
    out = []
    for signal, margin in c.CANARY_LIVE_MARGINS.items():
        name, measure, nats = SIGNALS[signal]
        if nats:
            value, note = '{{ $value | printf "%.2f" }} nats', f"margin {number(margin)} nats"
        else:
            value, note = "{{ $value | humanizePercentage }}", f"absolute; margin {margin:.0%}"
        stable = (
            f'label_replace({name}{{version_label="stable"}}, "stable_version", "$1", "version",'
            ' "(.*)")'
        )
        out.append(
            Alert(
                "CanaryDegradedVsStable",
                f'(\n  {name}{{version_label="canary"}}\n'
                f"  - on (model) group_left (stable_version)\n  {stable}\n) > {number(margin)}\n"
                f'and on (model, version) {OUTPUTS}{{version_label="canary"}} >= {n}\n'
                f'and on (model) {OUTPUTS}{{version_label="stable"}} >= {n}',
                c.CANARY_LIVE_FOR,
                c.CANARY_LIVE_SEVERITY,
                "A canary version is worse than the stable version on live traffic.",
                f"Model {{{{ $labels.model }}}}: over the last {c.CANARY_LIVE_WINDOW}, the "
                f"{measure} of canary version {{{{ $labels.version }}}} is {value} higher than "
                f"stable version {{{{ $labels.stable_version }}}}'s ({note}), with at least {n} "
                "outputs of each.",
                # while a model server is down or reloading, one version may answer while the
                # other does not yet: what the window holds then is the outage's, which pages
                # by its own alert
                symptom=True,
                windowed=True,
                labels={"signal": signal},
            )
        )
    return out
