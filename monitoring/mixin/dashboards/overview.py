"""Service overview: SLOs and error budget, traffic, latency, tokens, load protection."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard
from grafana_foundation_sdk.models.dashboard import DashboardLinkType

from monitoring.mixin import config as cfg
from monitoring.mixin.dashboards.panels import (
    RATE,
    Q,
    bad_above,
    new_dashboard,
    ok_above,
    query_variable,
    stat_panel,
    steps,
    ts_panel,
)
from monitoring.mixin.slis import DURATION, TPOT, error_ratio
from monitoring.mixin.slis import REQUESTS as REQS

GW_JOB = cfg.JOBS.selector("gateway")
SEL = f'{GW_JOB}, model=~"$model", version=~"$version"'
# the burn-rate alert of each SLO (its runbook is linked from the SLO's panels)
SLO_ALERTS = {
    "availability": "TokenPulseGatewayAvailabilityBudgetBurn",
    "latency": "TokenPulseGatewayLatencyBudgetBurn",
    "tpot": "TokenPulseGatewayTokenLatencyBudgetBurn",
}
BREAKER = {"0": ("closed", "green"), "1": ("half-open", "yellow"), "2": ("open", "red")}


def bad_ratio(slo: cfg.Slo, window: str) -> str:
    """The SLI's share of bad events over `window` for the chosen models and versions.

    The same expression the recording rules record per model (monitoring.mixin.slis).
    """
    return error_ratio(slo, window, SEL, by="")


def good_ratio(slo: cfg.Slo, window: str) -> str:
    """PromQL for the share of good events of an SLO over `window` (no traffic: no result)."""
    return f"1 - ({bad_ratio(slo, window)})"


def budget_left(slo: cfg.Slo) -> str:
    """Share of the period's error budget not yet spent (negative: overspent)."""
    return f"1 - ({bad_ratio(slo, cfg.SLO_PERIOD)}) / {1 - slo.objective:.6g}"


def _slo_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    d = d.with_row(dashboard.Row(f"SLOs ({cfg.SLO_PERIOD})"))
    for slo in cfg.SLOS:
        d = d.with_panel(
            stat_panel(
                f"SLI: {slo.name}",
                f"Share of {slo.description} over the SLO period ({cfg.SLO_PERIOD}); "
                f"the objective is {slo.objective:.2%}.",
                "percentunit",
                [Q(good_ratio(slo, cfg.SLO_PERIOD), slo.name)],
                ok_above(slo.objective),
                runbooks=(SLO_ALERTS[slo.name],),
            )
        )
        d = d.with_panel(
            stat_panel(
                f"Error budget left: {slo.name}",
                f"Share of the {cfg.SLO_PERIOD} error budget of the {slo.name} SLO not yet spent "
                "(below 0: the objective is missed). See the runbooks linked above.",
                "percentunit",
                [Q(budget_left(slo), slo.name)],
                steps((None, "red"), (0, "yellow"), (0.25, "green")),
                runbooks=(SLO_ALERTS[slo.name],),
            )
        )
    fast = cfg.BURN_TIERS[0]
    return d.with_panel(
        ts_panel(
            f"Burn rate ({fast.long})",
            f"How fast each SLO spends its budget over {fast.long}: 1 spends exactly the budget "
            f"in {cfg.SLO_PERIOD}; the dashed line is the {fast.factor:g}x page threshold.",
            "x",
            [Q(f"({bad_ratio(s, fast.long)}) / {1 - s.objective:.6g}", s.name) for s in cfg.SLOS],
            bad_above(fast.factor, warn=1),
            width=24,
            runbooks=tuple(SLO_ALERTS[s.name] for s in cfg.SLOS),
        )
    )


def _traffic_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    lat_slo = next(s for s in cfg.SLOS if s.name == "latency")
    tpot_slo = next(s for s in cfg.SLOS if s.name == "tpot")
    return (
        d.with_row(dashboard.Row("Traffic and latency"))
        .with_panel(
            ts_panel(
                "Requests/s by code",
                "Requests the gateway answered per second, by HTTP status code.",
                "reqps",
                [Q(f"sum by (code) (rate({REQS}{{{SEL}}}[{RATE}]))", "{{code}}")],
                runbooks=("TokenPulseGatewayDown", "TokenPulseGatewayThroughputDrop"),
            )
        )
        .with_panel(
            ts_panel(
                "Errors by code",
                "Non-2xx answers per second: 5xx burn the availability budget, 4xx are callers' "
                "mistakes, rate limits and shedding.",
                "reqps",
                [Q(f'sum by (code) (rate({REQS}{{{SEL}, code!~"2.."}}[{RATE}]))', "{{code}}")],
                bad_above(1.0),
                runbooks=("TokenPulseGatewayAvailabilityBudgetBurn",),
            )
        )
        .with_panel(
            ts_panel(
                "Latency percentiles",
                "End-to-end request latency at the gateway; the dashed line is the latency SLO "
                "threshold.",
                "s",
                [
                    Q(
                        f"histogram_quantile({p}, sum by (le) (rate({DURATION}_bucket{{{SEL}}}"
                        f"[{RATE}])))",
                        f"p{round(p * 100)}",
                    )
                    for p in (0.5, 0.9, 0.99)
                ],
                bad_above(float(lat_slo.threshold_le)),
                runbooks=("TokenPulseGatewayLatencyBudgetBurn",),
            )
        )
        .with_panel(
            ts_panel(
                "Time per output token",
                "Upstream time per generated token; the dashed line is the TPOT SLO threshold.",
                "s",
                [
                    Q(
                        f"histogram_quantile({p}, sum by (le) (rate({TPOT}_bucket{{{SEL}}}"
                        f"[{RATE}])))",
                        f"p{round(p * 100)}",
                    )
                    for p in (0.5, 0.99)
                ],
                bad_above(float(tpot_slo.threshold_le)),
                runbooks=("TokenPulseGatewayTokenLatencyBudgetBurn",),
            )
        )
        .with_panel(
            ts_panel(
                "Tokens/s",
                "Prompt tokens read and output tokens generated per second, all outputs.",
                "short",
                [
                    Q(f"sum(rate(tokenpulse_gateway_output_tokens_total{{{SEL}}}[{RATE}]))",
                      "output"),
                    Q(f"sum(rate(tokenpulse_gateway_prompt_tokens_total{{{SEL}}}[{RATE}]))",
                      "prompt"),
                ],
                runbooks=("TokenPulseGatewayThroughputDrop",),
            )
        )
    )  # fmt: skip


def _protection_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    # shed, rate-limited and breaker-rejected counters appear with their first event: until
    # then the true value is zero, so fall back to 0 rather than showing no data
    def events(metric: str) -> str:
        return (
            f'sum(rate({metric}{{{GW_JOB}, model=~"$model"}}[{RATE}])) '
            f"or (sum(rate({REQS}{{{SEL}}}[{RATE}])) * 0)"
        )

    return (
        d.with_row(dashboard.Row("Load protection"))
        .with_panel(
            ts_panel(
                "In-flight and queued requests",
                "Requests being handled now by route, and requests waiting for a concurrency slot.",
                "short",
                [
                    Q(f"sum by (route) (tokenpulse_gateway_in_flight_requests{{{GW_JOB}}})",
                      "in flight {{route}}"),
                    Q(f"sum(tokenpulse_gateway_queued_requests{{{GW_JOB}}})", "queued"),
                ],
                bad_above(float(cfg.BATCH_QUEUED_MIN) * 32, warn=float(cfg.BATCH_QUEUED_MIN)),
                width=10,
            )
        )
        .with_panel(
            ts_panel(
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
                width=10,
            )
        )
        .with_panel(
            stat_panel(
                "Circuit breaker",
                "The gateway's upstream circuit breaker: closed (normal), half-open (probing) "
                "or open (failing fast).",
                "none",
                [Q(f"max(tokenpulse_gateway_circuit_breaker_state{{{GW_JOB}}})", "breaker")],
                steps((None, "green"), (1, "yellow"), (2, "red")),
                mappings=BREAKER,
                width=4,
                runbooks=("TokenPulseGatewayCircuitBreakerOpen",),
            ).height(8)
        )
    )  # fmt: skip


def build() -> dashboard.Dashboard:
    """The service overview dashboard."""
    runbooks = cfg.RUNBOOK_URL_PATTERN.rsplit("/", 1)[0] + "/"
    d = (
        new_dashboard(
            cfg.DASHBOARD_UIDS["slo"],
            "TokenPulse / Service overview",
            "SLO status and error budget, traffic, latency, tokens and load protection of the "
            "generation API, as the gateway sees it.",
            ["tokenpulse", "slo", "gateway"],
        )
        .with_variable(query_variable("model", "Model", f"label_values({REQS}{{{GW_JOB}}}, model)"))
        .with_variable(
            query_variable(
                "version",
                "Version",
                f'label_values({REQS}{{{GW_JOB}, model=~"$model"}}, version)',
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
    return _protection_row(_traffic_row(_slo_row(d)))
