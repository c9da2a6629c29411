"""Canary alerts: the exporter's golden prompts per version, and the canary against stable.

The golden-prompt canaries say whether a version still answers as it did at export; a version
exported broken answers its own golden prompts as recorded, so the live comparison (the
per-version signals monitoring/mixin/canary.py records) fires when the canary-labelled version is
worse than the stable one on the same traffic.
"""

from __future__ import annotations

from monitoring.mixin.canary import live_outputs, live_signals
from monitoring.mixin.config import MixinConfig
from monitoring.mixin.model import Alert
from monitoring.mixin.promql import number


def golden_alerts(cfg: MixinConfig) -> list[Alert]:
    """Golden-prompt canaries per version, and canary vs stable."""
    ex = cfg.sel("exporter")
    return [
        Alert(
            "CanaryFailing",
            f"tokenpulse_canary_success{ex} == 0",
            cfg.canary_for,
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
            cfg.canary_for,
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
            f" > {number(cfg.canary_nll_margin)}",
            cfg.canary_worse_for,
            "warning",
            "The canary version is less confident than the stable one on golden prompts.",
            "Model {{ $labels.model }}: the canary-labelled version's golden-prompt mean NLL is "
            '{{ $value | printf "%.2f" }} nats above the stable version\'s.',
        ),
    ]


def live_alerts(cfg: MixinConfig) -> list[Alert]:
    """One rule per signal: the canary-labelled version worse than the stable-labelled one
    (recorded series only, so the windows are the recording rules')."""
    n = cfg.canary_live_min_outputs
    signals, outputs = live_signals(cfg), live_outputs(cfg)
    out = []
    for signal, margin in cfg.canary_live_margins.items():
        name, measure, nats = signals[signal]
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
                f'and on (model, version) {outputs}{{version_label="canary"}} >= {n}\n'
                f'and on (model) {outputs}{{version_label="stable"}} >= {n}',
                cfg.canary_live_for,
                cfg.canary_live_severity,
                "A canary version is worse than the stable version on live traffic.",
                f"Model {{{{ $labels.model }}}}: over the last {cfg.canary_live_window}, the "
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


def alerts(cfg: MixinConfig) -> list[Alert]:
    """Every canary alert, in rule-file order."""
    return [*golden_alerts(cfg), *live_alerts(cfg)]
