"""Draw a dashboard as one PNG: its time-series and stat panels laid out on Grafana's grid.

A preview for incident and load-test reports, not a Grafana replacement: it reads the committed
dashboard JSON, sends each panel's queries (variables set to All) to Prometheus' query_range (an
instant target to its instant query, as Grafana does), and draws titles, units, legends and
threshold lines with matplotlib's Agg backend.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

from tokenpulse import paths

matplotlib.use("Agg")  # no display on servers; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from pydantic import Field  # noqa: E402
from pydantic_settings import BaseSettings, SettingsConfigDict  # noqa: E402

from monitoring.mixin.dashboards.queries import substitute  # noqa: E402
from monitoring.preview.prom import PromClient, Series, seconds  # noqa: E402

DASHBOARDS = paths.DASHBOARDS
GRID_COLS = 24
COL_IN, ROW_IN = 0.75, 0.5  # inches per grid column / row
HEADER_IN = 0.6  # the figure title
# inside a grid cell: room for the panel title, tick labels and the gap to the next panel
PAD_TOP_IN, PAD_BOTTOM_IN, PAD_LEFT_IN, PAD_RIGHT_IN = 0.3, 0.3, 0.6, 0.15
_SCALES: dict[str, list[tuple[float, str]]] = {
    "bytes": [(2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B")],
    "hertz": [(1e9, "GHz"), (1e6, "MHz"), (1e3, "kHz"), (1, "Hz")],
    "s": [(1, "s"), (1e-3, "ms"), (1e-6, "µs")],
}
_SUFFIX = {"reqps": " req/s", "ops": " ops/s", "watt": " W", "celsius": " °C", "x": "x"}


class PreviewSettings(BaseSettings):
    """Where to read data and dashboards, where to write PNGs, which time range."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_PREVIEW_", extra="ignore")

    prometheus_url: str = Field(description="Prometheus base URL, e.g. http://127.0.0.1:9090")
    out: Path = Field(description="folder for the PNG files")
    since: str = Field("15m", pattern=r"^\d+[smhdw]$", description="time range ending now")
    rate_interval: str = Field(
        "1m", pattern=r"^\d+[smhdw]$", description="what $__rate_interval stands for"
    )
    dashboards: Path = Field(DASHBOARDS, description="folder of dashboard JSON files")


@dataclass
class PanelResult:
    """What one panel showed."""

    title: str
    series: int


@dataclass
class Preview:
    """One rendered dashboard."""

    path: Path
    panels: list[PanelResult] = field(default_factory=list)

    def empty(self) -> list[str]:
        """Titles of panels that drew no series."""
        return [p.title for p in self.panels if p.series == 0]


def fmt(value: float, unit: str) -> str:
    """A value in the panel's unit, as Grafana would roughly print it."""
    if math.isnan(value):
        return "NaN"
    if unit == "percentunit":
        return f"{value * 100:.1f}%"
    if unit in _SCALES:
        if value == 0:
            return f"0 {next(name for scale, name in _SCALES[unit] if scale == 1)}"
        for scale, name in _SCALES[unit]:
            if abs(value) >= scale or scale == _SCALES[unit][-1][0]:
                return f"{value / scale:.3g} {name}"
    return f"{value:.4g}{_SUFFIX.get(unit, '')}"


def legend(template: str, labels: dict[str, str]) -> str:
    """Grafana's `{{label}}` legend template filled from a series' labels."""
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template)


def _thresholds(panel: dict[str, Any]) -> list[tuple[float, str]]:
    steps = panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps", [])
    return [(s["value"], s["color"]) for s in steps if s.get("value") is not None]


def _color(value: float, panel: dict[str, Any]) -> str:
    steps = panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps", [])
    color = steps[0]["color"] if steps else "green"
    for step in steps[1:]:
        if step.get("value") is not None and value >= step["value"]:
            color = step["color"]
    return {"green": "#73bf69", "yellow": "#fade2a", "red": "#f2495c"}.get(color, color)


def _draw_timeseries(ax: Axes, panel: dict[str, Any], results: list[tuple[str, Series]]) -> None:
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
    for label, s in results:
        ax.plot([t for t, _ in s.points], [v for _, v in s.points], linewidth=1, label=label)
    for value, _color_name in _thresholds(panel):
        ax.axhline(value, color=_color(value, panel), linestyle="--", linewidth=0.8)
    ax.yaxis.set_major_formatter(lambda v, _pos: fmt(v, unit))
    clock = "%H:%M:%S" if results and _span(results) < 900 else "%H:%M"
    ax.xaxis.set_major_formatter(lambda t, _pos: time.strftime(clock, time.localtime(t)))
    ax.tick_params(labelsize=6)
    ax.grid(alpha=0.3)
    if results:
        ax.legend(fontsize=5, loc="upper left", ncol=2, framealpha=0.6)


def _span(results: list[tuple[str, Series]]) -> float:
    times = [t for _, s in results for t, _ in s.points]
    return max(times) - min(times) if times else 0.0


def _axes(fig: Figure, grid: dict[str, int], size: tuple[float, float]) -> Axes:
    """Axes inside one panel's grid cell, leaving room for its title and tick labels."""
    fig_w, fig_h = size
    left = grid["x"] * COL_IN + PAD_LEFT_IN
    top = HEADER_IN + grid["y"] * ROW_IN + PAD_TOP_IN
    width = grid["w"] * COL_IN - PAD_LEFT_IN - PAD_RIGHT_IN
    height = grid["h"] * ROW_IN - PAD_TOP_IN - PAD_BOTTOM_IN
    return fig.add_axes((left / fig_w, 1 - (top + height) / fig_h, width / fig_w, height / fig_h))


def _draw_stat(ax: Axes, panel: dict[str, Any], results: list[tuple[str, Series]]) -> None:
    ax.set_xticks([])
    ax.set_yticks([])
    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    if not results:
        ax.text(0.5, 0.4, defaults.get("noValue", "no data"), ha="center", va="center", fontsize=10)
        return
    label, s = results[0]
    value = s.points[-1][1]
    mapping = {
        k: v["text"] for m in defaults.get("mappings", []) for k, v in m.get("options", {}).items()
    }
    text = mapping.get(f"{value:g}", fmt(value, defaults.get("unit", "")))
    ax.set_facecolor(_color(value, panel))
    ax.text(0.5, 0.4, text, ha="center", va="center", fontsize=14, weight="bold")


def render_dashboard(
    model: dict[str, Any], client: PromClient, out: Path, since_s: float, rate_interval: str
) -> Preview:
    """Query and draw every time-series and stat panel of one dashboard into `out`."""
    all_panels = model.get("panels", [])
    panels = [p for p in all_panels if p.get("type") in ("timeseries", "stat")]
    rows = max((p["gridPos"]["y"] + p["gridPos"]["h"] for p in all_panels), default=1)
    size = (GRID_COLS * COL_IN, HEADER_IN + rows * ROW_IN)
    fig = plt.figure(figsize=size, dpi=100)
    fig.suptitle(
        f"{model['title']}: preview of the last {since_s / 60:g} min (not Grafana)",
        fontsize=12, y=1 - 0.25 / size[1],
    )  # fmt: skip
    for row in (p for p in all_panels if p.get("type") == "row"):
        y = HEADER_IN + row["gridPos"]["y"] * ROW_IN + ROW_IN * 0.6
        fig.text(0.01, 1 - y / size[1], row["title"], fontsize=10, weight="bold")
    end = time.time()
    start, step = end - since_s, max(1.0, since_s / 240)
    preview = Preview(out / f"{model['uid']}.png")
    for panel in panels:
        ax = _axes(fig, panel["gridPos"], size)
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        ax.set_title(f"{panel['title']} [{unit}]", fontsize=8, loc="left")
        results = []
        for target in panel.get("targets", []):
            expr = substitute(target["expr"], rate_interval)
            # an instant target (a stat over the SLO period) is asked once, as Grafana does
            found = (
                client.query(expr, at=end)
                if target.get("instant")
                else client.query_range(expr, start, end, step)
            )
            for s in found:
                results.append((legend(target.get("legendFormat", ""), s.labels), s))
        (_draw_stat if panel["type"] == "stat" else _draw_timeseries)(ax, panel, results)
        preview.panels.append(PanelResult(panel["title"], len(results)))
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(preview.path)
    plt.close(fig)
    return preview


def run(settings: PreviewSettings) -> list[Path]:
    """Render every dashboard JSON in `settings.dashboards`; the PNG paths."""
    since_s = seconds(settings.since)
    client = PromClient(settings.prometheus_url)
    try:
        return [
            render_dashboard(
                json.loads(path.read_text()), client, settings.out, since_s, settings.rate_interval
            ).path
            for path in sorted(settings.dashboards.glob("*.json"))
        ]
    finally:
        client.close()
