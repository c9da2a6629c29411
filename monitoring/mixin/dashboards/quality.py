"""Model quality per version: NLL, repetition, empty and truncated outputs, canaries."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard

from monitoring.mixin.canary import live_outputs, live_signals
from monitoring.mixin.config import Degradation, MixinConfig
from monitoring.mixin.dashboards.panels import (
    GRAFANA,
    PROM,
    RATE,
    Q,
    bad_above,
    new_dashboard,
    ok_above,
    query_variable,
    ts_panel,
)
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME, FINISH_LENGTH

TRUNCATED = f', finish_reason="{FINISH_LENGTH}"'
FEEDBACK_SUM = "sum by (version) (rate(tokenpulse_gateway_feedback_total"


def _sel(cfg: MixinConfig) -> str:
    return f'{cfg.jobs.selector("gateway")}, model=~"$model", version=~"$version"'


def _canary(cfg: MixinConfig) -> str:
    return f'{cfg.jobs.selector("exporter")}, model=~"$model", version=~"$version"'


def _outputs(cfg: MixinConfig) -> str:
    count = "tokenpulse_gateway_request_output_tokens_count"
    return f"sum by (version) (rate({count}{{{_sel(cfg)}}}[{RATE}]))"


def _degradation(cfg: MixinConfig) -> dict[str, Degradation]:
    return {d.name: d for d in cfg.degradations}


def _feedback_range(cfg: MixinConfig) -> str:
    return cfg.feedback_window


def _mean(cfg: MixinConfig, metric: str) -> str:
    sel = _sel(cfg)
    return (
        f"sum by (version) (rate({metric}_sum{{{sel}}}[{RATE}])) "
        f"/ sum by (version) (rate({metric}_count{{{sel}}}[{RATE}]))"
    )


def _share(cfg: MixinConfig, counter: str, extra: str = "") -> str:
    # the counter appears with its first event: until then its share is truly zero
    outputs = _outputs(cfg)
    sel = _sel(cfg)
    events = f"sum by (version) (rate({counter}{{{sel}{extra}}}[{RATE}]))"
    return f"({events} or {outputs} * 0) / {outputs}"


def _gateway_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    degradation = _degradation(cfg)
    feedback_range = _feedback_range(cfg)
    sel = _sel(cfg)
    nll_floor = cfg.nll_min_delta
    return (
        d.with_row(dashboard.Row("Outputs per version (gateway)"))
        .with_panel(
            ts_panel(cfg,
                "Mean NLL per token",
                "Mean and p90 negative log-likelihood per generated token, per version: higher "
                "means the model is less sure of what it writes.",
                "none",
                [Q(_mean(cfg, "tokenpulse_gateway_mean_nll_nats"), "v{{version}}"),
                 Q("histogram_quantile(0.9, sum by (version, le) (rate("
                   f"tokenpulse_gateway_mean_nll_nats_bucket{{{sel}}}[{RATE}])))",
                   "p90 v{{version}}")],
                width=8,
                runbooks=("TokenPulseQualityNllDrift",),
                samples=True,
                exemplars=True,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Repetition",
                "Mean share of repeated word 3-grams per output; the dashed line is the "
                "repetition alert floor.",
                "percentunit",
                [Q(_mean(cfg, "tokenpulse_gateway_repetition_ratio"), "v{{version}}")],
                bad_above(degradation["repetition"].floor),
                width=8,
                runbooks=("TokenPulseQualityRepetition",),
                samples=True,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Empty outputs",
                "Share of outputs with no visible text; the dashed line is the alert floor.",
                "percentunit",
                [Q(_share(cfg, "tokenpulse_gateway_empty_outputs_total"), "v{{version}}")],
                bad_above(degradation["empty_output"].floor),
                width=8,
                runbooks=("TokenPulseQualityEmptyOutputs",),
                samples=True,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Truncation",
                "Share of outputs stopped by max_new_tokens instead of a stop token.",
                "percentunit",
                [Q(_share(cfg, "tokenpulse_gateway_finish_reason_total", TRUNCATED),
                   "v{{version}}")],
                bad_above(degradation["truncation"].floor),
                width=8,
                runbooks=("TokenPulseQualityTruncation",),
                samples=True,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Negative feedback",
                "Share of feedback (POST /v1/feedback) scored negative over the last "
                f"{cfg.feedback_window} (feedback is sparse), per version, while feedback "
                "arrives; the dashed line is the alert floor.",
                "percentunit",
                [Q(f"({FEEDBACK_SUM}{{{sel}, score_class=\"negative\"}}[{feedback_range}])) "
                   f"or {FEEDBACK_SUM}{{{sel}}}[{feedback_range}])) * 0) / "
                   f"({FEEDBACK_SUM}{{{sel}}}[{feedback_range}])) > 0)", "v{{version}}")],
                bad_above(cfg.feedback_floor),
                width=8,
                runbooks=("TokenPulseQualityNegativeFeedback",),
                samples=True,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Output length",
                "Mean and p90 generated tokens per output.",
                "short",
                [
                    Q(_mean(cfg, "tokenpulse_gateway_request_output_tokens"), "mean v{{version}}"),
                    Q("histogram_quantile(0.9, sum by (version, le) (rate("
                      f"tokenpulse_gateway_request_output_tokens_bucket{{{sel}}}[{RATE}])))",
                      "p90 v{{version}}"),
                ],
                width=8,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "NLL drift from the mean",
                "Each version's mean NLL minus the mean over all selected versions: stable and "
                f"canary side by side; past the dashed lines ({nll_floor:g} nats) is a drift.",
                "none",
                [Q(f"{_mean(cfg, 'tokenpulse_gateway_mean_nll_nats')} - scalar("
                   f"sum(rate(tokenpulse_gateway_mean_nll_nats_sum{{{sel}}}[{RATE}])) / "
                   f"sum(rate(tokenpulse_gateway_mean_nll_nats_count{{{sel}}}[{RATE}])))",
                   "v{{version}}")],
                bad_above(nll_floor),
                width=8,
                samples=True,
            )
        )
    )  # fmt: skip


def _canary_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    canary = _canary(cfg)
    return (
        d.with_row(dashboard.Row("Canaries (exporter golden prompts)"))
        .with_panel(
            ts_panel(cfg,
                "Canary success and match",
                "Per version: success is 1 when every golden prompt got an answer; match ratio "
                "is the share of answers equal to the golden output.",
                "percentunit",
                [
                    Q(f"min by (version) (tokenpulse_canary_success{{{canary}}})",
                      "success v{{version}}"),
                    Q(f"min by (version) (tokenpulse_canary_match_ratio{{{canary}}})",
                      "match v{{version}}"),
                ],
                ok_above(1),
                max_value=1,
                runbooks=("TokenPulseCanaryFailing", "TokenPulseCanaryMismatch"),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Canary NLL: answers vs golden",
                "Mean NLL of the canary answers and of the same prompts at export, per version; "
                "a gap means the served version is not the exported one.",
                "none",
                [
                    Q(f"max by (version) (tokenpulse_canary_mean_nll_nats{{{canary}}})",
                      "served v{{version}}"),
                    Q(f"max by (version) (tokenpulse_canary_golden_mean_nll_nats{{{canary}}})",
                      "golden v{{version}}"),
                ],
                runbooks=("TokenPulseCanaryWorseThanStable",),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Canary runs by result",
                "Canary runs in the interval per version and result: ok, mismatch (answered, "
                "not golden) or error.",
                "short",
                [Q(f"sum by (version, result) (increase(tokenpulse_canary_runs_total{{{canary}}}"
                   f"[{RATE}]))", "v{{version}} {{result}}")],
                width=24,
            )
        )
    )  # fmt: skip


def _live_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    """The canary against stable on live traffic: what TokenPulseCanaryDegradedVsStable reads."""
    model = 'model=~"$model"'
    # each labelled version minus stable: stable draws the zero line, so the panel shows the
    # comparison's state before a canary is labelled too
    worse = [
        Q(
            f"({name}{{{model}}}\n  - on (model) group_left "
            f'{name}{{{model}, version_label="stable"}}) / {cfg.canary_live_margins[signal]:g}',
            f"{{{{model}}}} {{{{version_label}}}} v{{{{version}}}} {signal}",
        )
        for signal, (name, _, _) in live_signals(cfg).items()
    ]
    window, n = cfg.canary_live_window, cfg.canary_live_min_outputs
    return (
        d.with_row(dashboard.Row("Canary vs stable (gateway, live traffic)"))
        .with_panel(
            ts_panel(cfg,
                "Canary vs stable on live traffic",
                f"Per signal, over the last {window}: (version - stable) / the signal's margin "
                "for the versions behind the canary and stable labels (empty, truncated and "
                "slow shares, mean repetition, mean NLL); stable is the zero line. At 1 (the "
                "dashed line) the canary is worse by the alert's margin; the alert also needs "
                f"{n} outputs of each (the panel beside). Each version's own values: the panels "
                "of the first row.",
                "none",
                worse,
                bad_above(1),
                width=16,
                runbooks=("TokenPulseCanaryDegradedVsStable",),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Outputs per version label",
                f"Outputs of the versions behind the canary and stable labels over the last "
                f"{window}; under the dashed line ({n}) the live comparison waits for more.",
                "short",
                [Q(f"{live_outputs(cfg)}{{{model}}}", "{{model}} {{version_label}} v{{version}}")],
                ok_above(n),
                width=8,
                runbooks=("TokenPulseCanaryDegradedVsStable",),
            )
        )
    )  # fmt: skip


def build(cfg: MixinConfig) -> dashboard.Dashboard:
    """The model quality dashboard."""
    ex = cfg.jobs.selector("exporter")
    gw_job = cfg.jobs.selector("gateway")
    d = (
        new_dashboard(
            cfg.dashboard_uids["quality"],
            "TokenPulse / Model quality",
            "Output quality per model version as the gateway measures it on live traffic, and "
            "the exporter's golden-prompt canaries; version changes are annotated.",
            ["tokenpulse", "quality"],
        )
        .with_variable(
            query_variable(
                "model",
                "Model",
                f"label_values(tokenpulse_gateway_requests_total{{{gw_job}}}, model)",
                DEFAULT_MODEL_NAME,
            )
        )
        .with_variable(
            query_variable(
                "version",
                "Version",
                f'label_values(tokenpulse_gateway_requests_total{{{gw_job}, model=~"$model"}}, '
                "version)",
            )
        )
        .annotation(
            dashboard.AnnotationQuery()
            .name("Version changes")
            .datasource(PROM)
            .enable(True)
            .icon_color("purple")
            .expr(
                f"changes(tokenpulse_tfserving_model_version_state_change_timestamp_seconds"
                f'{{{ex}, model=~"$model"}}[2m]) > 0'
            )
        )
        .annotation(
            dashboard.AnnotationQuery()
            .name("Deployments")
            .datasource(GRAFANA)
            .enable(True)
            .icon_color("blue")
            # what `tokenpulse grafana annotate` writes
            .target(dashboard.AnnotationTarget().type("tags").tags(["deployment"]).limit(100))
        )
    )
    return _live_row(cfg, _canary_row(cfg, _gateway_row(cfg, d)))
