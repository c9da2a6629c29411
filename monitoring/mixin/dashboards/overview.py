"""Service overview: SLOs and error budget, traffic, latency, tokens, load protection."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard, timeseries
from grafana_foundation_sdk.models.dashboard import DashboardLinkType

from monitoring.mixin.alerts.gateway import SLO_NAMES
from monitoring.mixin.config import MixinConfig, Slo
from monitoring.mixin.dashboards.panels import (
    RATE,
    PromAnnotation,
    Q,
    bad_above,
    new_dashboard,
    ok_above,
    query_variable,
    stat_panel,
    steps,
    ts_panel,
)
from monitoring.mixin.dashboards.streaming import streaming_row
from monitoring.mixin.model import TFSERVING_PREFIX as TFS
from monitoring.mixin.model import sli_name
from monitoring.mixin.promql import seconds
from monitoring.mixin.slis import DURATION, TPOT
from monitoring.mixin.slis import REQUESTS as REQS
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

BREAKER = {"0": ("closed", "green"), "1": ("half-open", "yellow"), "2": ("open", "red")}
# the alerts that notify someone: pages and tickets (info alerts only hold inhibitions, and the
# Watchdog, always firing, has severity none)
FIRING = 'ALERTS{alertstate="firing", severity=~"critical|warning"}'
TIER_COLOURS = {"critical": "red", "warning": "yellow"}


def _sel(cfg: MixinConfig) -> str:
    return f'{cfg.jobs.selector("gateway")}, model=~"$model", version=~"$version"'


def _ms(cfg: MixinConfig) -> str:
    return f'{cfg.jobs.selector("modelserver")}, model_name=~"$model"'


def _slo_alerts(cfg: MixinConfig) -> dict[str, str]:
    # the burn-rate alert of each SLO (its runbook is linked from the SLO's panels)
    return {slo: cfg.alert_prefix + name for slo, (name, _) in SLO_NAMES.items()}


def _sli_window(cfg: MixinConfig) -> str:
    # the recorded SLI a period's value is averaged from: the shortest window, sampled at the rule
    # evaluation interval, so every recorded value counts once
    return min((t.short for t in cfg.burn_tiers), key=seconds)


def _sli_step(cfg: MixinConfig) -> str:
    return cfg.evaluation_interval


def _qsel(cfg: MixinConfig) -> str:
    # the queue wait has no version: it is before routing
    return f'{cfg.jobs.selector("gateway")}, model=~"$model"'


def _predict(cfg: MixinConfig) -> str:
    return f'{_ms(cfg)}, API=~"predict|Predict"'


def windows(cfg: MixinConfig) -> list[str]:
    """Every window of every burn-rate tier, long and short, shortest first."""
    return sorted({w for t in cfg.burn_tiers for w in (t.long, t.short)}, key=seconds)


def sli(cfg: MixinConfig, slo: Slo, window: str) -> str:
    """The recorded error ratio of an SLO over `window`, per model, for the chosen models."""
    return f'{sli_name(slo.name, window)}{{model=~"$model"}}'


def period_bad_ratio(cfg: MixinConfig, slo: Slo) -> str:
    """Share of bad events over the SLO period per model, averaged from the recorded SLI.

    Each evaluation of the period weighs the same; idle ones (a NaN ratio: no requests) are left
    out rather than turning the whole period into NaN. An instant query: one value, not a range.
    """
    sli_step = _sli_step(cfg)
    sli_window = _sli_window(cfg)
    return (
        f"avg by (model) (avg_over_time(({sli(cfg, slo, sli_window)} >= 0)"
        f"[{cfg.slo_period}:{sli_step}]))"
    )


def budget_left(cfg: MixinConfig, slo: Slo) -> str:
    """Share of the period's error budget not yet spent (negative: overspent)."""
    return f"1 - {period_bad_ratio(cfg, slo)} / {1 - slo.objective:.6g}"


def _alerts_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    def firing(severity: str) -> str:
        return f'count(ALERTS{{alertstate="firing", severity="{severity}"}}) or vector(0)'

    return (
        d.with_row(dashboard.Row("Firing now"))
        .with_panel(
            stat_panel(cfg,
                "Pages firing",
                "Critical alerts firing now (they page on-call); each is also an annotation on "
                "every graph below.",
                "none",
                [Q(firing("critical"), "pages")],
                bad_above(1),
                width=4,
            ).height(6)
        )
        .with_panel(
            stat_panel(cfg,
                "Tickets firing",
                "Warning alerts firing now (they raise a ticket).",
                "none",
                [Q(firing("warning"), "tickets")],
                steps((None, "green"), (1, "yellow")),
                width=4,
            ).height(6)
        )
        .with_panel(
            ts_panel(cfg,
                "Firing alerts",
                "Pages and tickets firing, by alert and severity (from Prometheus' ALERTS "
                "series); the runbook is in each alert's annotations and the dashboard's "
                "Runbooks link.",
                "short",
                [Q(f"sum by (alertname, severity) ({FIRING}) or on () "
                   'label_replace(vector(0), "alertname", "none firing", "", "")',
                   "{{alertname}} {{severity}}")],
                bad_above(1),
                width=16,
            ).height(6)
        )
    )  # fmt: skip


def _slo_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    sli_window = _sli_window(cfg)
    slo_alerts = _slo_alerts(cfg)
    d = d.with_row(dashboard.Row(f"SLOs ({cfg.slo_period}, per model)"))
    stat_w = max(2, 24 // (2 * len(cfg.slos)))  # every SLO's two stats on one line
    for slo in cfg.slos:
        d = d.with_panel(
            stat_panel(
                cfg,
                f"SLI: {slo.name}",
                f"Share of {slo.description} over the SLO period ({cfg.slo_period}), per model "
                f"(all versions), from the recorded SLI {sli_name(slo.name, sli_window)} "
                f"averaged over the period; the objective is {slo.objective:.2%}.",
                "percentunit",
                [Q(f"1 - {period_bad_ratio(cfg, slo)}", "{{model}}", instant=True)],
                ok_above(slo.objective),
                width=stat_w,
                runbooks=(slo_alerts[slo.name],),
            )
        )
        d = d.with_panel(
            stat_panel(
                cfg,
                f"Error budget left: {slo.name}",
                f"Share of the {cfg.slo_period} error budget of the {slo.name} SLO not yet spent, "
                "per model (below 0: the objective is missed). See the runbooks linked above.",
                "percentunit",
                [Q(budget_left(cfg, slo), "{{model}}", instant=True)],
                steps((None, "red"), (0, "yellow"), (0.25, "green")),
                width=stat_w,
                runbooks=(slo_alerts[slo.name],),
            )
        )
    return _burn_row(cfg, d)


def _burn_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    slo_alerts = _slo_alerts(cfg)
    tiers = ", ".join(
        f"{t.long}+{t.short} at {t.factor:g}x ({'page' if t.severity == 'critical' else 'ticket'})"
        for t in cfg.burn_tiers
    )
    lines = sorted({(t.factor, TIER_COLOURS[t.severity]) for t in cfg.burn_tiers})
    for slo in cfg.slos:
        d = d.with_panel(
            ts_panel(
                cfg,
                f"Burn rate: {slo.name}",
                f"How fast the {slo.name} SLO spends its budget over every alert window, worst "
                f"selected model (recorded SLIs): 1 spends exactly the budget in "
                f"{cfg.slo_period}. A tier fires when both its windows cross its dashed line: "
                f"{tiers}.",
                "x",
                [Q(f"max({sli(cfg, slo, w)}) / {1 - slo.objective:.6g}", w) for w in windows(cfg)],
                steps((None, "green"), *lines),
                width=max(6, 24 // len(cfg.slos)),
                runbooks=(slo_alerts[slo.name],),
            )
        )
    return d


GW = "tokenpulse_gateway_"


def _mean(metric: str, selector: str) -> str:
    return (
        f"sum(rate({metric}_sum{{{selector}}}[{RATE}])) "
        f"/ sum(rate({metric}_count{{{selector}}}[{RATE}]))"
    )


def _p99(metric: str, selector: str) -> str:
    return f"histogram_quantile(0.99, sum by (le) (rate({metric}_bucket{{{selector}}}[{RATE}])))"


def _breakdown(cfg: MixinConfig, stat: str, queries: list[Q]) -> timeseries.Panel:
    return ts_panel(
        cfg,
        f"Latency breakdown ({stat})",
        f"Where a request's time goes, {stat} of each stage: end to end at the gateway, waiting "
        "there for a concurrency slot, the upstream predict call, TF Serving's own predict "
        "latency (batch queue and model run) and the model run alone. Upstream minus TF "
        "Serving is the network and (de)serialisation; end to end minus wait and upstream is "
        "the gateway itself.",
        "s",
        queries,
        runbooks=("TokenPulseGatewayLatencyBudgetBurn", "TokenPulseTfServingBatchQueueSlow"),
    )


def _traffic_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    ms = _ms(cfg)
    sel = _sel(cfg)
    lat_slo = next(s for s in cfg.slos if s.name == "latency")
    tpot_slo = next(s for s in cfg.slos if s.name == "tpot")
    return (
        d.with_row(dashboard.Row("Traffic and latency"))
        .with_panel(
            ts_panel(cfg,
                "Requests/s by code",
                "Requests the gateway answered per second, by HTTP status code.",
                "reqps",
                [Q(f"sum by (code) (rate({REQS}{{{sel}}}[{RATE}]))", "{{code}}")],
                runbooks=("TokenPulseGatewayDown", "TokenPulseGatewayThroughputDrop"),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Errors by code",
                "Non-2xx answers per second: 5xx burn the availability budget, 4xx are callers' "
                "mistakes, rate limits and shedding.",
                "reqps",
                [Q(f'sum by (code) (rate({REQS}{{{sel}, code!~"2.."}}[{RATE}]))', "{{code}}")],
                bad_above(1.0),
                runbooks=("TokenPulseGatewayAvailabilityBudgetBurn",),
                samples=True,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Latency percentiles",
                "End-to-end request latency at the gateway; the dashed line is the latency SLO "
                "threshold.",
                "s",
                [
                    Q(
                        f"histogram_quantile({p}, sum by (le) (rate({DURATION}_bucket{{{sel}}}"
                        f"[{RATE}])))",
                        f"p{round(p * 100)}",
                    )
                    for p in (0.5, 0.9, 0.99)
                ],
                bad_above(float(lat_slo.threshold_le)),
                runbooks=("TokenPulseGatewayLatencyBudgetBurn",),
                samples=True,
                exemplars=True,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Time per output token",
                "Upstream time per generated token; the dashed line is the TPOT SLO threshold.",
                "s",
                [
                    Q(
                        f"histogram_quantile({p}, sum by (le) (rate({TPOT}_bucket{{{sel}}}"
                        f"[{RATE}])))",
                        f"p{round(p * 100)}",
                    )
                    for p in (0.5, 0.99)
                ],
                bad_above(float(tpot_slo.threshold_le)),
                runbooks=("TokenPulseGatewayTokenLatencyBudgetBurn",),
            )
        )
        .with_panel(_breakdown(cfg, "mean", [
            Q(_mean(DURATION, sel), "end to end (gateway)"),
            Q(_mean(f"{GW}queue_wait_seconds", _qsel(cfg)), "waiting for a slot (gateway)"),
            Q(_mean(f"{GW}upstream_duration_seconds", sel), "upstream call"),
            Q(f"{_mean(f'{TFS}request_latency', _predict(cfg))} / 1e6", "TF Serving predict"),
            Q(f"{_mean(f'{TFS}runtime_latency', ms)} / 1e6", "model run"),
        ]))
        .with_panel(_breakdown(cfg, "p99", [
            Q(_p99(DURATION, sel), "end to end (gateway)"),
            Q(_p99(f"{GW}queue_wait_seconds", _qsel(cfg)), "waiting for a slot (gateway)"),
            Q(_p99(f"{GW}upstream_duration_seconds", sel), "upstream call"),
            Q(f"{_p99(f'{TFS}request_latency', _predict(cfg))} / 1e6", "TF Serving predict"),
            Q(f"{_p99(f'{TFS}runtime_latency', ms)} / 1e6", "model run"),
        ]))
        .with_panel(
            ts_panel(cfg,
                "Tokens/s",
                "Prompt tokens read and output tokens generated per second, all outputs.",
                "short",
                [
                    Q(f"sum(rate(tokenpulse_gateway_output_tokens_total{{{sel}}}[{RATE}]))",
                      "output"),
                    Q(f"sum(rate(tokenpulse_gateway_prompt_tokens_total{{{sel}}}[{RATE}]))",
                      "prompt"),
                ],
                runbooks=("TokenPulseGatewayThroughputDrop",),
            )
        )
    )  # fmt: skip


def _protection_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    # shed, rate-limited and breaker-rejected counters appear with their first event: until
    # then the true value is zero, so fall back to 0 rather than showing no data
    gw_job = cfg.jobs.selector("gateway")
    sel = _sel(cfg)

    def events(metric: str) -> str:
        return (
            f'sum(rate({metric}{{{gw_job}, model=~"$model"}}[{RATE}])) '
            f"or (sum(rate({REQS}{{{sel}}}[{RATE}])) * 0)"
        )

    slots, queue = float(cfg.gateway_max_concurrency), float(cfg.gateway_max_queue)
    return (
        d.with_row(dashboard.Row("Load protection"))
        .with_panel(
            ts_panel(cfg,
                "Upstream slots in use",
                "Upstream calls in flight over every replica, against the gateway's "
                f"max_concurrency ({cfg.gateway_max_concurrency} as shipped: the top dashed "
                "line); at the limit new requests queue. Requests inside the gateway by route "
                "(queued and streaming ones included) for comparison.",
                "short",
                [Q(f"sum(tokenpulse_gateway_upstream_in_flight_requests{{{gw_job}}})",
                   "slots in use"),
                 Q(f"sum by (route) (tokenpulse_gateway_in_flight_requests{{{gw_job}}})",
                   "in the gateway {{route}}")],
                bad_above(slots, warn=slots * cfg.saturation_warn),
                width=6,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Queued for a slot",
                "Requests waiting for an upstream slot, against the gateway's max_queue "
                f"({cfg.gateway_max_queue} as shipped: the top dashed line); past it requests "
                "are shed (503).",
                "short",
                [Q(f"sum(tokenpulse_gateway_queued_requests{{{gw_job}}})", "queued")],
                bad_above(queue, warn=queue * cfg.saturation_warn),
                width=6,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Shed, rate-limited and breaker-rejected",
                "Requests refused before reaching the model: shed for lack of a slot, over a "
                "key's rate limit, or failed fast by an open circuit breaker.",
                "reqps",
                [
                    Q(events("tokenpulse_gateway_shed_total"), "shed"),
                    Q(events("tokenpulse_gateway_rate_limited_total"), "rate limited"),
                    Q(events("tokenpulse_gateway_circuit_breaker_rejected_total"), "breaker"),
                ],
                bad_above(1.0),
                width=8,
            )
        )
        .with_panel(
            stat_panel(cfg,
                "Circuit breaker",
                "The gateway's upstream circuit breaker: closed (normal), half-open (probing) "
                "or open (failing fast).",
                "none",
                [Q(f"max(tokenpulse_gateway_circuit_breaker_state{{{gw_job}}})", "breaker")],
                steps((None, "green"), (1, "yellow"), (2, "red")),
                mappings=BREAKER,
                width=4,
                runbooks=("TokenPulseGatewayCircuitBreakerOpen",),
            ).height(8)
        )
    )  # fmt: skip


def build(cfg: MixinConfig) -> dashboard.Dashboard:
    """The service overview dashboard."""
    gw_job = cfg.jobs.selector("gateway")
    runbooks = cfg.links.runbook_url_pattern.rsplit("/", 1)[0] + "/"
    d = (
        new_dashboard(
            cfg.dashboard_uids["slo"],
            "TokenPulse / Service overview",
            "Firing alerts, SLO status and error budget, burn rates, traffic, latency and where "
            "it goes, tokens and load protection of the generation API, as the gateway sees it.",
            ["tokenpulse", "slo", "gateway"],
        )
        .with_variable(
            query_variable(
                "model", "Model", f"label_values({REQS}{{{gw_job}}}, model)", DEFAULT_MODEL_NAME
            )
        )
        .with_variable(
            query_variable(
                "version",
                "Version",
                f'label_values({REQS}{{{gw_job}, model=~"$model"}}, version)',
            )
        )
        .annotation(
            PromAnnotation(
                "Alerts", FIRING, "{{alertname}} ({{severity}})", ("severity", "model"), "red"
            )
        )
        .link(
            dashboard.DashboardLink("Runbooks")
            .type(DashboardLinkType.LINK)
            .url(runbooks)
            .icon("doc")
            .target_blank(True)
        )
    )
    d = _traffic_row(cfg, _slo_row(cfg, _alerts_row(cfg, d)))
    return _protection_row(cfg, streaming_row(cfg, d))
