"""Shared panel and variable builders, so every dashboard has the same datasource, units and look.

Every panel gets a title, a description, a unit, a legend and thresholds (drawn as lines on time
series); every query goes through the `$datasource` variable, never a fixed datasource.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import AnnotationQuery as AnnotationQueryModel
from grafana_foundation_sdk.models.dashboard import DashboardLink as DashboardLinkModel
from grafana_foundation_sdk.models.dashboard import (
    DashboardLinkType,
    DataSourceRef,
    Threshold,
    ThresholdsMode,
    ValueMap,
    ValueMappingResult,
    VariableOption,
    VariableRefresh,
    VariableSort,
)

from monitoring.mixin.config import MixinConfig
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
    """One query of a panel: PromQL and its legend; `instant` asks for the last value only (a
    stat over a long period, where a range query would redo the period at every step)."""

    expr: str
    legend: str
    instant: bool = False


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


def _targets(queries: Sequence[Q], exemplars: bool = False) -> list[prometheus.Dataquery]:
    targets = []
    for i, q in enumerate(queries):
        target = prometheus.Dataquery().expr(q.expr).legend_format(q.legend)
        target = target.ref_id(chr(ord("A") + i))
        if q.instant:
            target = target.instant()
        if exemplars:  # a histogram's exemplars: each dot links its sample (datasource config)
            target = target.exemplar(True)
        targets.append(target)
    return targets


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


def kibana_samples_url(cfg: MixinConfig) -> str:
    """Kibana Discover on the samples data view, filtered to the dashboard's `$model` and
    `$version` and its time range (Grafana fills in the variables)."""
    query = quote(SAMPLES_QUERY, safe="${}:/")
    return (
        f"{cfg.links.kibana_url}/app/discover#/?_g=(time:(from:'{_FROM}',to:'{_TO}'))"
        f"&_a=(index:'{DATA_VIEW_ID}',query:(language:lucene,query:'{query}'))"
    )


# what `samples show` takes: the exemplar's label value, as Grafana passes it to a destination
REQUEST_ID = "${__value.raw}"


def exemplar_hint(cfg: MixinConfig) -> str:
    """What a histogram panel's exemplar dots are and how to open one's sample."""
    return (
        f"Dots are exemplars, each one request ({cfg.exemplar_label}): click one for its sample "
        "in Kibana; locally: `tokenpulse samples show --sqlite-path run/samples.db "
        f"<{cfg.exemplar_label}>`."
    )


def kibana_request_url(cfg: MixinConfig, request_id: str = REQUEST_ID) -> str:
    """Kibana Discover on the one sample of a request id (an exemplar's label), over the last
    30 days: the link the Prometheus datasource gives every exemplar (its provisioning)."""
    query = quote(f'genai_sample.request_id:"{request_id}"', safe="${}:")
    return (
        f"{cfg.links.kibana_url}/app/discover#/?_g=(time:(from:now-30d,to:now))"
        f"&_a=(index:'{DATA_VIEW_ID}',query:(language:lucene,query:'{query}'))"
    )


class _PromAnnotation(AnnotationQueryModel):
    """A Prometheus annotation query with the fields the SDK's model leaves out."""

    def __init__(self, extra: dict[str, object], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.extra = extra

    def to_json(self) -> dict[str, object]:
        return {**super().to_json(), **self.extra}


class PromAnnotation(Builder[AnnotationQueryModel]):
    """Builds an annotation from a PromQL query: one event per series while it returns a value,
    titled and tagged from its labels."""

    def __init__(self, name: str, expr: str, title: str, tags: Sequence[str], color: str) -> None:
        self._model = _PromAnnotation(
            {"titleFormat": title, "tagKeys": ",".join(tags), "step": "60s",
             "useValueForTime": False},
            name=name, datasource=PROM, enable=True, icon_color=color, expr=expr,
        )  # fmt: skip

    def build(self) -> AnnotationQueryModel:
        """The annotation model."""
        return self._model


def _common(
    cfg: MixinConfig, panel: _P, title: str, description: str, unit: str, queries: Sequence[Q],
    thresholds: list[Threshold], width: int, height: int, no_value: str, runbooks: Sequence[str],
    samples: bool = False, exemplars: bool = False,
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
    for target in _targets(queries, exemplars):
        panel = panel.with_target(target)
    links: list[Builder[DashboardLinkModel]] = [
        dashboard.DashboardLink(f"Runbook: {alert}")
        .type(DashboardLinkType.LINK)
        .url(cfg.links.runbook_url(alert))
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
            .url(kibana_samples_url(cfg))
            .target_blank(True)
        )
    if links:
        panel = panel.links(links)
    return panel


def ts_panel(
    cfg: MixinConfig,
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
    exemplars: bool = False,
) -> timeseries.Panel:
    """A time series with its thresholds drawn as dashed lines and a table legend; `samples` links
    the sampled requests of `$model`/`$version` in the time range (`kibana_samples_url`);
    `exemplars` shows the histogram's exemplars, each linking its own sample."""
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
    if exemplars:
        description = f"{description} {exemplar_hint(cfg)}"
    return _common(
        cfg, panel, title, description, unit, queries, thresholds, width, TS_H, no_value, runbooks,
        samples, exemplars,
    )  # fmt: skip


def stat_panel(
    cfg: MixinConfig,
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
    """A single-value panel coloured by its thresholds; `mappings` turn values into words. Over
    instant queries it has no sparkline (there is no series to draw)."""
    instant = all(q.instant for q in queries)
    panel = (
        stat.Panel()
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .graph_mode(common.BigValueGraphMode.NONE if instant else common.BigValueGraphMode.AREA)
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
        cfg, panel, title, description, unit, queries, thresholds, width, STAT_H, no_value,
        runbooks,
    )  # fmt: skip


def datasource_variable() -> dashboard.DatasourceVariable:
    """The Prometheus datasource picker every query goes through."""
    return dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus")


def query_variable(
    name: str, label: str, query: str, default: str | None = None
) -> dashboard.QueryVariable:
    """A multi-value label variable with All (`.*`), refreshed when the time range changes;
    `default` is selected when the dashboard opens (else All)."""
    variable = dashboard.QueryVariable(name)
    if default is not None:
        variable = variable.current(VariableOption(selected=True, text=[default], value=[default]))
    return (
        variable.label(label)
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
