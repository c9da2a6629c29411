"""The service overview for 3 a.m.: firing alerts, SLOs from the recorded SLIs, every burn window,
the latency breakdown and saturation against the gateway's own limits."""

from __future__ import annotations

import pytest

from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.dashboards import build_model, overview
from monitoring.mixin.dashboards.queries import metric_names, substitute
from monitoring.mixin.model import sli_name
from monitoring.mixin.promql import NORMAL, seconds
from monitoring.mixin.rules import sli_rules
from serving.gateway.settings import GatewaySettings
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME


@pytest.fixture(scope="module")
def panels() -> dict[str, dict]:
    return {p["title"]: p for p in build_model(config, "slo")["panels"] if p["type"] != "row"}


def _exprs(panel: dict) -> list[str]:
    return [t["expr"] for t in panel["targets"]]


def test_slo_stats_read_the_recorded_slis_as_instant_queries(panels) -> None:
    recorded = {r["record"] for r in sli_rules(config, NORMAL)}
    for slo in config.slos:
        for title in (f"SLI: {slo.name}", f"Error budget left: {slo.name}"):
            (target,) = panels[title]["targets"]
            assert target.get("instant") is True, title
            assert metric_names(target["expr"]) <= recorded, title
            assert sli_name(slo.name, overview._sli_window(config)) in target["expr"]
            # no rate over the period at every refresh: the SLI is recorded
            assert "rate(" not in target["expr"]
        assert panels[f"SLI: {slo.name}"]["options"]["graphMode"] == "none"


def test_burn_rate_panels_draw_every_window_of_every_tier(panels) -> None:
    windows = {w for tier in config.burn_tiers for w in (tier.long, tier.short)}
    for slo in config.slos:
        panel = panels[f"Burn rate: {slo.name}"]
        legends = [t["legendFormat"] for t in panel["targets"]]
        assert set(legends) == windows and len(legends) == len(windows)
        for target in panel["targets"]:
            assert metric_names(target["expr"]) == {sli_name(slo.name, target["legendFormat"])}
        lines = {s["value"] for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]}
        assert {tier.factor for tier in config.burn_tiers} <= lines
        assert [link["url"] for link in panel["links"]] == [
            config.links.runbook_url(overview._slo_alerts(config)[slo.name])
        ]


def test_period_sli_skips_idle_minutes_in_real_promql(panels, promql) -> None:
    """An hour at 1% errors, an idle hour (the recorded ratio is NaN: 0/0), an hour at 3%: the
    period's SLI is 98%, not NaN, and the budget is overspent 3x.

    The period is cut to the 3 hours of data: promtool's test engine refuses queries over 10k
    samples (a real Prometheus allows 50M), and a 30-day subquery at 1m steps holds 43,200.
    """
    slo = next(s for s in config.slos if s.name == "availability")
    name = sli_name(slo.name, overview._sli_window(config))
    labels = f'{name}{{model="{DEFAULT_MODEL_NAME}", window="{overview._sli_window(config)}"}}'
    step = seconds(overview._sli_step(config))  # one recorded value per evaluation
    hour = 3600 // step
    values = f"0.01x{hour - 1} " + "NaN " * hour + f"0.03x{hour - 1}"
    at = f"{(3 * hour - 1) * step}s"
    chosen = {"model": DEFAULT_MODEL_NAME}

    def expr(title: str) -> str:
        text = substitute(_exprs(panels[title])[0], "1m", chosen)
        period = f"[{config.slo_period}:{overview._sli_step(config)}]"
        assert period in text
        return text.replace(period, f"[3h:{overview._sli_step(config)}]")

    budget = round(1 - 0.02 / (1 - slo.objective), 6)
    promql(
        [{"series": labels, "values": values}],
        [
            {"expr": f"round({expr('SLI: availability')}, 0.000001)", "eval_time": at,
             "exp_samples": [{"labels": f'{{model="{DEFAULT_MODEL_NAME}"}}', "value": 0.98}]},
            {"expr": f"round({expr('Error budget left: availability')}, 0.000001)", "eval_time": at,
             "exp_samples": [{"labels": f'{{model="{DEFAULT_MODEL_NAME}"}}', "value": budget}]},
        ],
        interval=overview._sli_step(config),
    )  # fmt: skip


def test_firing_alerts_panel_and_annotations() -> None:
    model = build_model(config, "slo")
    (annotation,) = [a for a in model["annotations"]["list"] if a.get("expr")]
    assert metric_names(annotation["expr"]) == {"ALERTS"}
    assert 'alertstate="firing"' in annotation["expr"]
    assert "{{alertname}}" in annotation["titleFormat"]
    first = next(p for p in model["panels"] if p["type"] != "row")
    assert first["title"] == "Pages firing"
    firing = next(p for p in model["panels"] if p["title"] == "Firing alerts")
    (expr,) = _exprs(firing)
    assert "ALERTS{" in expr and "severity=~" in expr
    # with nothing firing the panel says so instead of "no data"
    assert "none firing" in expr and "or on ()" in expr


BREAKDOWN = (
    "tokenpulse_gateway_queue_wait_seconds",
    "tokenpulse_gateway_upstream_duration_seconds",
    "tokenpulse_gateway_request_duration_seconds",
    ":tensorflow:serving:request_latency",
    ":tensorflow:serving:runtime_latency",
)


def test_latency_breakdown_shows_queue_wait_upstream_and_model_time(panels) -> None:
    for stat, suffix in (("mean", "_sum"), ("p99", "_bucket")):
        exprs = _exprs(panels[f"Latency breakdown ({stat})"])
        used = set().union(*(metric_names(e) for e in exprs))
        assert {m + suffix for m in BREAKDOWN} <= used, stat


def test_saturation_limits_are_the_gateways_shipped_settings(panels) -> None:
    fields = GatewaySettings.model_fields
    assert config.gateway_max_concurrency == fields["max_concurrency"].default
    assert config.gateway_max_queue == fields["max_queue"].default

    def top(title: str) -> float:
        return panels[title]["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]["value"]

    assert top("Upstream slots in use") == config.gateway_max_concurrency
    assert top("Queued for a slot") == config.gateway_max_queue


def test_model_variables_default_to_the_served_model() -> None:
    for key in ("slo", "serving", "quality"):
        variables = {v["name"]: v for v in build_model(config, key)["templating"]["list"]}
        assert variables["model"]["current"]["value"] == [DEFAULT_MODEL_NAME], key
        assert "current" not in variables["version"] or not variables["version"]["current"]
