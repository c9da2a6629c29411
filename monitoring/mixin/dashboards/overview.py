"""Service overview: SLOs and error budget, traffic, latency, tokens, load protection."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard, timeseries
from grafana_foundation_sdk.models.dashboard import DashboardLinkType

from monitoring.mixin import config as cfg
from monitoring.mixin.alerts import SLO_NAMES
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

GW_JOB = cfg.JOBS.selector("gateway")
SEL = f'{GW_JOB}, model=~"$model", version=~"$version"'
MS = f'{cfg.JOBS.selector("modelserver")}, model_name=~"$model"'
# the burn-rate alert of each SLO (its runbook is linked from the SLO's panels)
SLO_ALERTS = {slo: cfg.ALERT_PREFIX + name for slo, (name, _) in SLO_NAMES.items()}
BREAKER = {"0": ("closed", "green"), "1": ("half-open", "yellow"), "2": ("open", "red")}
# the alerts that notify someone: pages and tickets (info alerts only hold inhibitions, and the
# Watchdog, always firing, has severity none)
FIRING = 'ALERTS{alertstate="firing", severity=~"critical|warning"}'
# the recorded SLI a period's value is averaged from: the shortest window, sampled at the rule
# evaluation interval, so every recorded value counts once
SLI_WINDOW = min((t.short for t in cfg.BURN_TIERS), key=seconds)
SLI_STEP = cfg.EVALUATION_INTERVAL
TIER_COLOURS = {"critical": "red", "warning": "yellow"}


def windows() -> list[str]:
    """Every window of every burn-rate tier, long and short, shortest first."""
    return sorted({w for t in cfg.BURN_TIERS for w in (t.long, t.short)}, key=seconds)


def sli(slo: cfg.Slo, window: str) -> str:
    """The recorded error ratio of an SLO over `window`, per model, for the chosen models."""
    return f'{sli_name(slo.name, window)}{{model=~"$model"}}'


def period_bad_ratio(slo: cfg.Slo) -> str:
    """Share of bad events over the SLO period per model, averaged from the recorded SLI.

    Each evaluation of the period weighs the same; idle ones (a NaN ratio: no requests) are left
    out rather than turning the whole period into NaN. An instant query: one value, not a range.
    """
    return (
        f"avg by (model) (avg_over_time(({sli(slo, SLI_WINDOW)} >= 0)"
        f"[{cfg.SLO_PERIOD}:{SLI_STEP}]))"
    )


def budget_left(slo: cfg.Slo) -> str:
    """Share of the period's error budget not yet spent (negative: overspent)."""
    return f"1 - {period_bad_ratio(slo)} / {1 - slo.objective:.6g}"


def _alerts_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    def firing(severity: str) -> str:
        return f'count(ALERTS{{alertstate="firing", severity="{severity}"}}) or vector(0)'

    return (
        d.with_row(dashboard.Row("Firing now"))
        .with_panel(
            stat_panel(
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
            stat_panel(
                "Tickets firing",
                "Warning alerts firing now (they raise a ticket).",
                "none",
                [Q(firing("warning"), "tickets")],
                steps((None, "green"), (1, "yellow")),
                width=4,
            ).height(6)
        )
        .with_panel(
            ts_panel(
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


def _slo_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    d = d.with_row(dashboard.Row(f"SLOs ({cfg.SLO_PERIOD}, per model)"))
    stat_w = max(2, 24 // (2 * len(cfg.SLOS)))  # every SLO's two stats on one line
    for slo in cfg.SLOS:
        d = d.with_panel(
            stat_panel(
                f"SLI: {slo.name}",
                f"Share of {slo.description} over the SLO period ({cfg.SLO_PERIOD}), per model "
                f"(all versions), from the recorded SLI {sli_name(slo.name, SLI_WINDOW)} "
                f"averaged over the period; the objective is {slo.objective:.2%}.",
                "percentunit",
                [Q(f"1 - {period_bad_ratio(slo)}", "{{model}}", instant=True)],
                ok_above(slo.objective),
                width=stat_w,
                runbooks=(SLO_ALERTS[slo.name],),
            )
        )
        d = d.with_panel(
            stat_panel(
                f"Error budget left: {slo.name}",
                f"Share of the {cfg.SLO_PERIOD} error budget of the {slo.name} SLO not yet spent, "
                "per model (below 0: the objective is missed). See the runbooks linked above.",
                "percentunit",
                [Q(budget_left(slo), "{{model}}", instant=True)],
                steps((None, "red"), (0, "yellow"), (0.25, "green")),
                width=stat_w,
                runbooks=(SLO_ALERTS[slo.name],),
            )
        )
    return _burn_row(d)


def _burn_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    tiers = ", ".join(
        f"{t.long}+{t.short} at {t.factor:g}x ({'page' if t.severity == 'critical' else 'ticket'})"
        for t in cfg.BURN_TIERS
    )
    lines = sorted({(t.factor, TIER_COLOURS[t.severity]) for t in cfg.BURN_TIERS})
    for slo in cfg.SLOS:
        d = d.with_panel(
            ts_panel(
                f"Burn rate: {slo.name}",
                f"How fast the {slo.name} SLO spends its budget over every alert window, worst "
                f"selected model (recorded SLIs): 1 spends exactly the budget in "
                f"{cfg.SLO_PERIOD}. A tier fires when both its windows cross its dashed line: "
                f"{tiers}.",
                "x",
                [Q(f"max({sli(slo, w)}) / {1 - slo.objective:.6g}", w) for w in windows()],
                steps((None, "green"), *lines),
                width=max(6, 24 // len(cfg.SLOS)),
                runbooks=(SLO_ALERTS[slo.name],),
            )
        )
    return d


GW = "tokenpulse_gateway_"
QSEL = f'{GW_JOB}, model=~"$model"'  # the queue wait has no version: it is before routing
PREDICT = f'{MS}, API=~"predict|Predict"'


def _mean(metric: str, selector: str) -> str:
    return (
        f"sum(rate({metric}_sum{{{selector}}}[{RATE}])) "
        f"/ sum(rate({metric}_count{{{selector}}}[{RATE}]))"
    )


def _p99(metric: str, selector: str) -> str:
    return f"histogram_quantile(0.99, sum by (le) (rate({metric}_bucket{{{selector}}}[{RATE}])))"


def _breakdown(stat: str, queries: list[Q]) -> timeseries.Panel:
    return ts_panel(
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
                samples=True,
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
                samples=True,
                exemplars=True,
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
        .with_panel(_breakdown("mean", [
            Q(_mean(DURATION, SEL), "end to end (gateway)"),
            Q(_mean(f"{GW}queue_wait_seconds", QSEL), "waiting for a slot (gateway)"),
            Q(_mean(f"{GW}upstream_duration_seconds", SEL), "upstream call"),
            Q(f"{_mean(f'{TFS}request_latency', PREDICT)} / 1e6", "TF Serving predict"),
            Q(f"{_mean(f'{TFS}runtime_latency', MS)} / 1e6", "model run"),
        ]))
        .with_panel(_breakdown("p99", [
            Q(_p99(DURATION, SEL), "end to end (gateway)"),
            Q(_p99(f"{GW}queue_wait_seconds", QSEL), "waiting for a slot (gateway)"),
            Q(_p99(f"{GW}upstream_duration_seconds", SEL), "upstream call"),
            Q(f"{_p99(f'{TFS}request_latency', PREDICT)} / 1e6", "TF Serving predict"),
            Q(f"{_p99(f'{TFS}runtime_latency', MS)} / 1e6", "model run"),
        ]))
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

    slots, queue = float(cfg.GATEWAY_MAX_CONCURRENCY), float(cfg.GATEWAY_MAX_QUEUE)
    return (
        d.with_row(dashboard.Row("Load protection"))
        .with_panel(
            ts_panel(
                "Upstream slots in use",
                "Upstream calls in flight over every replica, against the gateway's "
                f"max_concurrency ({cfg.GATEWAY_MAX_CONCURRENCY} as shipped: the top dashed "
                "line); at the limit new requests queue. Requests inside the gateway by route "
                "(queued and streaming ones included) for comparison.",
                "short",
                [Q(f"sum(tokenpulse_gateway_upstream_in_flight_requests{{{GW_JOB}}})",
                   "slots in use"),
                 Q(f"sum by (route) (tokenpulse_gateway_in_flight_requests{{{GW_JOB}}})",
                   "in the gateway {{route}}")],
                bad_above(slots, warn=slots * cfg.SATURATION_WARN),
                width=6,
            )
        )
        .with_panel(
            ts_panel(
                "Queued for a slot",
                "Requests waiting for an upstream slot, against the gateway's max_queue "
                f"({cfg.GATEWAY_MAX_QUEUE} as shipped: the top dashed line); past it requests "
                "are shed (503).",
                "short",
                [Q(f"sum(tokenpulse_gateway_queued_requests{{{GW_JOB}}})", "queued")],
                bad_above(queue, warn=queue * cfg.SATURATION_WARN),
                width=6,
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
                width=8,
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
            "Firing alerts, SLO status and error budget, burn rates, traffic, latency and where "
            "it goes, tokens and load protection of the generation API, as the gateway sees it.",
            ["tokenpulse", "slo", "gateway"],
        )
        .with_variable(
            query_variable(
                "model", "Model", f"label_values({REQS}{{{GW_JOB}}}, model)", DEFAULT_MODEL_NAME
            )
        )
        .with_variable(
            query_variable(
                "version",
                "Version",
                f'label_values({REQS}{{{GW_JOB}, model=~"$model"}}, version)',
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
    return _protection_row(streaming_row(_traffic_row(_slo_row(_alerts_row(d)))))
