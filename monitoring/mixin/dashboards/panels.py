"""Shared panel and variable builders, so every dashboard has the same datasource, units and look.

Every panel gets a title, a description, a unit, a legend and thresholds (drawn as lines on time
series); every query goes through the `$datasource` variable, never a fixed datasource.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import quote

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import DashboardLink as DashboardLinkModel
from grafana_foundation_sdk.models.dashboard import (
    DashboardLinkType,
    DataSourceRef,
    Threshold,
    ThresholdsMode,
    ValueMap,
    ValueMappingResult,
    VariableRefresh,
    VariableSort,
)

from monitoring.mixin import config as cfg
from tokenpulse.samples import DATA_VIEW_ID

PROM = DataSourceRef(type_val="prometheus", uid="${datasource}")
# Grafana's built-in annotation store (deployment annotations), present in every Grafana
GRAFANA = DataSourceRef(type_val="grafana", uid="-- Grafana --")
RATE = "$__rate_interval"
GREEN, YELLOW, RED, BLUE = "green", "yellow", "red", "blue"

# panel grid: 24 columns; heights in grid rows
TS_W, TS_H, STAT_W, STAT_H = 12, 8, 4, 4


@dataclass(frozen=True)
class Q:
    """One query of a panel: PromQL and its legend."""

    expr: str
    legend: str


def steps(*pairs: tuple[float | None, str]) -> list[Threshold]:
    """Threshold steps from (value, colour) pairs; the first value is the base (None)."""
    return [Threshold(value=v, color=c) for v, c in pairs]


def ok_above(limit: float) -> list[Threshold]:
    """Red below `limit`, green from it up (ratios that should stay high)."""
    return steps((None, RED), (limit, GREEN))


def bad_above(limit: float, warn: float | None = None) -> list[Threshold]:
    """Green below, (yellow from `warn`,) red from `limit` (latencies, errors, temperatures)."""
    pairs: list[tuple[float | None, str]] = [(None, GREEN)]
    if warn is not None:
        pairs.append((warn, YELLOW))
    pairs.append((limit, RED))
    return steps(*pairs)


NEUTRAL = steps((None, GREEN))


def _targets(queries: Sequence[Q]) -> list[prometheus.Dataquery]:
    return [
        prometheus.Dataquery().expr(q.expr).legend_format(q.legend).ref_id(chr(ord("A") + i))
        for i, q in enumerate(queries)
    ]


def _thresholds(ts: list[Threshold]) -> dashboard.ThresholdsConfig:
    return dashboard.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(ts)


_P = TypeVar("_P", timeseries.Panel, stat.Panel)


# Grafana interpolates these: the dashboard's model and version selection as Lucene regexes
# (`.*` for All) and its time range as ISO-8601
_MODEL, _VERSION = "${model:regex}", "${version:regex}"
_FROM, _TO = "${__from:date:iso}", "${__to:date:iso}"
SAMPLES_QUERY = f"genai_sample.model:/{_MODEL}/ AND genai_sample.version:/{_VERSION}/"
# the local stack has no Kibana: the same samples from its embedded store
SAMPLES_COMMAND = (
    "tokenpulse samples search --sqlite-path run/samples.db --model $model --version $version "
    f"--since {_FROM} --until {_TO}"
)


def kibana_samples_url() -> str:
    """Kibana Discover on the samples data view, filtered to the dashboard's `$model` and
    `$version` and its time range (Grafana fills in the variables)."""
    query = quote(SAMPLES_QUERY, safe="${}:/")
    return (
        f"{cfg.KIBANA_URL}/app/discover#/?_g=(time:(from:'{_FROM}',to:'{_TO}'))"
        f"&_a=(index:'{DATA_VIEW_ID}',query:(language:lucene,query:'{query}'))"
    )


def runbook_url(alert: str) -> str:
    """The runbook of an alert, from the mixin's URL pattern."""
    return cfg.RUNBOOK_URL_PATTERN.format(alertname=alert)


def _common(
    panel: _P, title: str, description: str, unit: str, queries: Sequence[Q],
    thresholds: list[Threshold], width: int, height: int, no_value: str, runbooks: Sequence[str],
    samples: bool = False,
) -> _P:  # fmt: skip
    panel = (
        panel.title(title)
        .description(description)
        .datasource(PROM)
        .unit(unit)
        .height(height)
        .span(width)
        .thresholds(_thresholds(thresholds))
        .no_value(no_value)
    )
    for target in _targets(queries):
        panel = panel.with_target(target)
    links: list[Builder[DashboardLinkModel]] = [
        dashboard.DashboardLink(f"Runbook: {alert}")
        .type(DashboardLinkType.LINK)
        .url(runbook_url(alert))
        .target_blank(True)
        for alert in runbooks  # the alerts that watch this panel's signal
    ]
    if samples:  # the sampled requests behind a spike
        panel = panel.description(
            f"{description} Samples behind it: the Kibana link; locally: `{SAMPLES_COMMAND}`."
        )
        links.append(
            dashboard.DashboardLink("Samples in Kibana (model, version, time range)")
            .type(DashboardLinkType.LINK)
            .url(kibana_samples_url())
            .target_blank(True)
        )
    if links:
        panel = panel.links(links)
    return panel


def ts_panel(
    title: str,
    description: str,
    unit: str,
    queries: Sequence[Q],
    thresholds: list[Threshold] = NEUTRAL,
    *,
    width: int = TS_W,
    max_value: float | None = None,
    no_value: str = "no data",
    runbooks: Sequence[str] = (),
    samples: bool = False,
) -> timeseries.Panel:
    """A time series with its thresholds drawn as dashed lines and a table legend; `samples` links
    the sampled requests of `$model`/`$version` in the time range (`kibana_samples_url`)."""
    dashed = len(thresholds) > 1
    panel = (
        timeseries.Panel()
        .min(0)
        .thresholds_style(
            common_b.GraphThresholdsStyleConfig().mode(
                common.GraphThresholdsStyleMode.DASHED
                if dashed
                else common.GraphThresholdsStyleMode.OFF
            )
        )
        .legend(
            common_b.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.TABLE)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
            .calcs(["lastNotNull", "max"])
        )
        .fill_opacity(10)
        .line_width(1)
    )
    if max_value is not None:
        panel = panel.max(max_value)
    return _common(
        panel, title, description, unit, queries, thresholds, width, TS_H, no_value, runbooks,
        samples,
    )  # fmt: skip


def stat_panel(
    title: str,
    description: str,
    unit: str,
    queries: Sequence[Q],
    thresholds: list[Threshold] = NEUTRAL,
    *,
    width: int = STAT_W,
    mappings: dict[str, tuple[str, str]] | None = None,
    no_value: str = "no data",
    runbooks: Sequence[str] = (),
) -> stat.Panel:
    """A single-value panel coloured by its thresholds; `mappings` turn values into words."""
    panel = (
        stat.Panel()
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .graph_mode(common.BigValueGraphMode.AREA)
        .text_mode(common.BigValueTextMode.VALUE_AND_NAME)
        .reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )
    if mappings:
        options = {
            value: ValueMappingResult(text=text, color=color, index=i)
            for i, (value, (text, color)) in enumerate(mappings.items())
        }
        panel = panel.mappings([ValueMap(options=options)])
    return _common(
        panel, title, description, unit, queries, thresholds, width, STAT_H, no_value, runbooks
    )


def datasource_variable() -> dashboard.DatasourceVariable:
    """The Prometheus datasource picker every query goes through."""
    return dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus")


def query_variable(name: str, label: str, query: str) -> dashboard.QueryVariable:
    """A multi-value label variable with All (`.*`), refreshed when the time range changes."""
    return (
        dashboard.QueryVariable(name)
        .label(label)
        .datasource(PROM)
        .query(query)
        .include_all(True)
        .all_value(".*")
        .multi(True)
        # refreshed on time-range change, so a new version appears without a reload
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_CASE_INSENSITIVE_ASC)
    )


def new_dashboard(
    uid: str, title: str, description: str, tags: Sequence[str]
) -> dashboard.Dashboard:
    """A dashboard with the house defaults: tags, 1-minute refresh, links to its siblings."""
    return (
        dashboard.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(list(tags))
        .refresh("1m")
        .time("now-3h", "now")
        .timezone("browser")
        .editable()
        .with_variable(datasource_variable())
        .link(
            dashboard.DashboardLink("TokenPulse")
            .type(DashboardLinkType.DASHBOARDS)
            .tags(["tokenpulse"])
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
    )
