"""The preview draws every panel of a dashboard from query_range results into one PNG."""

from __future__ import annotations

import re

import pytest
from PIL import Image

from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.dashboards import build_model
from monitoring.preview.prom import PromClient, PromError, Series, seconds
from monitoring.preview.render import fmt, legend, render_dashboard
from tokenpulse.procs import free_port


class RecordingProm:
    """Answers every range query with one series and records what it was asked."""

    def __init__(self, empty_for: str = "") -> None:
        self.exprs: list[str] = []
        self.instant: list[str] = []
        self.empty_for = empty_for

    def query_range(self, expr, start, end, step_s):
        self.exprs.append(expr)
        if self.empty_for and self.empty_for in expr:
            return []
        return [Series({"code": "200", "version": "1"}, [(start, 1.0), (end, 2.0)])]

    def query(self, expr, at=None):
        self.instant.append(expr)
        return [Series({"model": "gen"}, [(at, 0.99)])]


def test_every_panel_is_queried_with_variables_substituted_and_drawn(tmp_path):
    model = build_model(config, "slo")
    prom = RecordingProm()
    preview = render_dashboard(model, prom, tmp_path, 900, "30s")  # type: ignore[arg-type]
    panels = [p for p in model["panels"] if p["type"] != "row"]
    assert [p.title for p in preview.panels] == [p["title"] for p in panels]
    assert preview.empty() == []
    targets = [t for p in panels for t in p["targets"]]
    # the SLO stats are instant queries (a range query would redo the period at every step)
    assert len(prom.instant) == sum(1 for t in targets if t.get("instant")) >= 6
    assert len(prom.exprs) + len(prom.instant) == len(targets)
    assert not any(re.search(r"\$[A-Za-z_]", e) for e in prom.exprs + prom.instant)
    assert all("[30s]" in e for e in prom.exprs if "rate(" in e)
    width, height = Image.open(preview.path).size
    assert width > 1000 and height > 500


def test_a_panel_without_series_is_reported_empty(tmp_path):
    preview = render_dashboard(
        build_model(config, "gpu"), RecordingProm("tokenpulse_gpu_lost"), tmp_path, 900, "1m"
    )  # type: ignore[arg-type]
    assert preview.empty() == ["GPUs lost"]


def test_units_and_legends_read_like_grafana():
    assert fmt(0.995, "percentunit") == "99.5%"
    assert fmt(3 * 2**30, "bytes") == "3 GiB"
    assert fmt(0.0042, "s") == "4.2 ms"
    assert fmt(0, "s") == "0 s"
    assert fmt(1.5e9, "hertz") == "1.5 GHz"
    assert fmt(12, "reqps") == "12 req/s"
    assert legend("v{{version}} {{ state }}", {"version": "2", "state": "AVAILABLE"}) == (
        "v2 AVAILABLE"
    )


def test_durations_and_connection_errors():
    assert seconds("15m") == 900 and seconds("2h") == 7200
    with pytest.raises(PromError, match="bad duration"):
        seconds("15 minutes")
    client = PromClient(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(PromError, match="cannot reach Prometheus"):
        client.query("up")
    with pytest.raises(PromError, match="http://"):
        PromClient("localhost:9090")
