"""Queries read back from dashboard JSON: variables substituted, metric names found."""

from __future__ import annotations

from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.dashboards import build_model
from monitoring.mixin.dashboards.queries import (
    annotation_exprs,
    metric_names,
    panel_queries,
    substitute,
    variable_names,
)


def test_substitute_sets_all_variables_to_all_and_the_rate_interval():
    expr = 'rate(x{model=~"$model", version=~"${version}"}[$__rate_interval])'
    assert substitute(expr, "20s") == 'rate(x{model=~".*", version=~".*"}[20s])'
    assert substitute(expr, "1m", {"model": "gen"}) == 'rate(x{model=~"gen", version=~".*"}[1m])'
    kept = 'label_replace(x{v=~"$v"}, "version", "$1", "path", ".*/([0-9]+)")'
    assert (
        substitute(kept, "1m")
        == 'label_replace(x{v=~".*"}, "version", "$1", "path", ".*/([0-9]+)")'
    )


def test_metric_names_skip_functions_labels_keywords_and_numbers():
    expr = (
        'histogram_quantile(0.99, sum by (le, model) (rate(a_bucket{job="j", le="2.5"}[5m]))) '
        "/ 1e6 or on (model) :tensorflow:serving:request_count * 0 + scalar(b_total) unless c"
    )
    assert metric_names(expr) == {"a_bucket", ":tensorflow:serving:request_count", "b_total", "c"}


def test_every_panel_has_queries_and_variables_are_declared():
    model = build_model(config, "quality")
    queries = list(panel_queries(model))
    assert queries and all(q.expr and q.legend for q in queries)
    assert variable_names(model) == ["datasource", "model", "version"]
    assert annotation_exprs(model)  # version changes come from the exporter
    used = {v for q in queries for v in ("$model", "$version") if v in q.expr}
    assert used == {"$model", "$version"}
