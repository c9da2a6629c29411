"""The overview's streaming row: time to first token, inter-token latency, streamed against unary
requests and client disconnects (the gateway's vLLM-style stream metrics)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard, timeseries

from monitoring.mixin.alerts.gateway import SLO_NAMES
from monitoring.mixin.config import MixinConfig
from monitoring.mixin.dashboards.panels import RATE, Q, bad_above, ts_panel
from monitoring.mixin.model import GATEWAY_PREFIX as GW

TTFT = f"{GW}time_to_first_token_seconds"
ITL = f"{GW}inter_token_latency_seconds"
BY_MODE = f"{GW}requests_by_mode_total"
DISCONNECTS = f"{GW}client_disconnects_total"
QUANTILES = (0.5, 0.9, 0.99)


def _sel(cfg: MixinConfig) -> str:
    return f'{cfg.jobs.selector("gateway")}, model=~"$model", version=~"$version"'


def _quantiles(cfg: MixinConfig, metric: str, quantiles: tuple[float, ...] = QUANTILES) -> list[Q]:
    sel = _sel(cfg)
    return [
        Q(
            f"histogram_quantile({p}, sum by (le) (rate({metric}_bucket{{{sel}}}[{RATE}])))",
            f"p{round(p * 100)}",
        )
        for p in quantiles
    ]


def _ttft_panel(cfg: MixinConfig) -> timeseries.Panel:
    slo = next((s for s in cfg.slos if s.name == "ttft"), None)
    alert = SLO_NAMES.get("ttft")
    return ts_panel(
        cfg,
        "Time to first token",
        "Streams only: arrival at the gateway to the first generated token (prefill, queueing "
        "and the first chunk)" + ("; the dashed line is the TTFT SLO threshold." if slo else "."),
        "s",
        _quantiles(cfg, TTFT),
        bad_above(float(slo.threshold_le)) if slo else bad_above(1.0),
        width=8,
        runbooks=(cfg.alert_prefix + alert[0],) if alert else (),
        samples=True,
        exemplars=True,
    )


def streaming_row(cfg, d: dashboard.Dashboard) -> dashboard.Dashboard:
    """Streaming latency and how streams end, for the chosen models and versions."""
    sel = _sel(cfg)
    streams = f'sum(rate({BY_MODE}{{{sel}, mode="stream"}}[{RATE}]))'
    # the disconnect counter appears with its first event: until then the true value is zero
    disconnects = f"(sum(rate({DISCONNECTS}{{{sel}}}[{RATE}])) or {streams} * 0)"
    return (
        d.with_row(dashboard.Row("Streaming"))
        .with_panel(_ttft_panel(cfg))
        .with_panel(
            ts_panel(cfg,
                "Inter-token latency",
                "Streams only: time between chunks spread over each chunk's tokens (its mean "
                "is the time per output token); a rising p99 is a stuttering stream.",
                "s",
                _quantiles(cfg, ITL, (0.5, 0.99)),
                width=8,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Streamed and unary requests",
                "Requests answered per second by mode, streamed (server-sent events) or unary, "
                "and streams the client left before their end (answered 499; the upstream work "
                "is cancelled, no error budget spent).",
                "reqps",
                [Q(f"sum by (mode) (rate({BY_MODE}{{{sel}}}[{RATE}]))", "{{mode}}"),
                 Q(disconnects, "client disconnects")],
                width=8,
            )
        )
    )  # fmt: skip
