"""GPU series stay per host: two hosts' GPU 0 are two lines, never one max."""

from __future__ import annotations

from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.dashboards import build_model
from monitoring.mixin.dashboards.queries import panel_queries


def test_every_gpu_series_is_kept_per_host_and_gpu() -> None:
    model = build_model(config, "gpu")
    assert [v["name"] for v in model["templating"]["list"]] == ["datasource", "host", "gpu"]
    for q in panel_queries(model):
        if "by (" in q.expr:  # the per-GPU panels; the top stats count over every host
            assert "by (instance, gpu" in q.expr, q.panel
            assert "{{instance}}" in q.legend, q.panel
            assert 'instance=~"$host"' in q.expr, q.panel
