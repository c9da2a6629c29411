"""The report directory: report.html (self-contained: PNGs embedded as base64), the PNGs,
summary.json, requests.csv.gz (every request), command.txt and versions.json."""

from __future__ import annotations

import base64
import csv
import gzip
import html
import importlib.metadata as md
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from stack.loadtest.prom import FIGURES
from tokenpulse import paths

DPI = 80
SIZE = (7.5, 3.0)
COLORS = ("#1f77b4", "#ff7f0e", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#7f7f7f")


def versions() -> dict[str, Any]:
    """What ran: interpreter, platform, packages, the checkout's commit, CPUs and GPUs."""
    out: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    for dist in ("tokenpulse", "aiohttp", "numpy", "matplotlib", "tensorflow"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    try:
        commit = subprocess.run(
            ["git", "-C", str(paths.ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    out["commit"] = commit or None
    out["gpus"] = gpus()
    return out


def gpus() -> list[str]:
    """`nvidia-smi -L` lines ([] without a GPU or the tool)."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        text = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line for line in text.splitlines() if line.strip()]


# ---- plots -------------------------------------------------------------------------------


def _figure(rows: int = 1) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(rows, 1, figsize=(SIZE[0], SIZE[1] * rows), dpi=DPI, squeeze=False)
    return fig, [a[0] for a in axes]


def _png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return buf.getvalue()


def _offsets(runs: list[dict[str, Any]]) -> list[float]:
    t0 = runs[0]["started_unix"] if runs else 0.0
    return [r["started_unix"] - t0 for r in runs]


def _mark_runs(ax: Any, runs: list[dict[str, Any]]) -> None:
    if len(runs) < 2:
        return
    for off, run in zip(_offsets(runs), runs, strict=True):
        ax.axvline(off, color="#bbbbbb", lw=0.6)
        ax.text(
            off,
            1.0,
            f" {run['label']}",
            transform=ax.get_xaxis_transform(),
            fontsize=6,
            va="top",
            rotation=90,
            color="#777777",
        )


def _client_series(runs: list[dict[str, Any]], key: str) -> tuple[list[float], list[Any]]:
    xs: list[float] = []
    ys: list[Any] = []
    for off, run in zip(_offsets(runs), runs, strict=True):
        xs += [off + t for t in run["series"]["t"]]
        ys += run["series"][key]
    return xs, ys


def _server_series(runs: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    xs: list[float] = []
    ys: list[float] = []
    for off, run in zip(_offsets(runs), runs, strict=True):
        for t, v in run["server"]["series"].get(key, []):
            xs.append(off + t)
            ys.append(v)
    return xs, ys


def plot_latency(runs: list[dict[str, Any]], slo_s: float) -> bytes:
    """Client latency quantiles per second of intended send time."""
    fig, (ax,) = _figure()
    for key, color in zip(("p50", "p90", "p99"), COLORS, strict=False):
        xs, ys = _client_series(runs, key)
        ax.plot(
            xs,
            [float("nan") if y is None else y for y in ys],
            label=key,
            color=color,
            marker=".",
            ms=3,
            lw=1,
        )
    ax.axhline(slo_s, color="#d62728", ls="--", lw=0.8, label=f"SLO {slo_s:g}s")
    ax.set(
        xlabel="seconds (by intended send time)",
        ylabel="latency, s",
        title="Client latency (from intended send time)",
    )
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="upper left")
    _mark_runs(ax, runs)
    return _png(fig)


def plot_throughput(runs: list[dict[str, Any]]) -> bytes:
    """Offered and answered requests per second, and output tokens per second."""
    fig, (ax,) = _figure()
    for key, label, color in (("sent", "sent/s", COLORS[0]), ("ok", "ok/s", COLORS[3])):
        xs, ys = _client_series(runs, key)
        ax.plot(xs, ys, label=label, color=color, lw=1)
    ax.set(xlabel="seconds", ylabel="requests/s", title="Throughput")
    ax2 = ax.twinx()
    xs, ys = _client_series(runs, "tokens")
    ax2.plot(xs, ys, label="output tokens/s", color=COLORS[1], lw=0.8, ls=":")
    ax2.set_ylabel("tokens/s")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7, loc="upper left")
    _mark_runs(ax, runs)
    return _png(fig)


def plot_errors(runs: list[dict[str, Any]]) -> bytes:
    """Non-2xx outcomes per second, by status."""
    fig, (ax,) = _figure()
    labels = sorted({k for r in runs for k in r["series"]["errors"]})
    for label, color in zip(labels, COLORS * 3, strict=False):
        xs, ys = [], []
        for off, run in zip(_offsets(runs), runs, strict=True):
            vals = run["series"]["errors"].get(label, [0.0] * len(run["series"]["t"]))
            xs += [off + t for t in run["series"]["t"]]
            ys += vals
        ax.plot(xs, ys, label=label, color=color, lw=1)
    if not labels:
        ax.text(0.5, 0.5, "no errors or sheds", ha="center", va="center", transform=ax.transAxes)
    ax.set(xlabel="seconds", ylabel="per second", title="Errors and sheds by status")
    if labels:
        ax.legend(fontsize=7, loc="upper left")
    _mark_runs(ax, runs)
    return _png(fig)


def _plot_server(runs: list[dict[str, Any]], keys: list[str], title: str, ylabel: str) -> bytes:
    fig, (ax,) = _figure()
    for key, color in zip(keys, COLORS, strict=False):
        xs, ys = _server_series(runs, key)
        if xs:
            ax.plot(xs, ys, label=FIGURES[key], color=color, marker=".", ms=3, lw=1)
    ax.set(xlabel="seconds", ylabel=ylabel, title=title)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="upper left")
    _mark_runs(ax, runs)
    return _png(fig)


def has_server(runs: list[dict[str, Any]], keys: list[str]) -> bool:
    """Whether any run has a server-side series among `keys`."""
    return any(r["server"]["series"].get(k) for r in runs for k in keys)


SERVER_PLOTS: dict[str, tuple[list[str], str, str]] = {
    "batch_size": (["batch_size_mean"], "Batch size (server)", "rows per batch"),
    "queueing": (
        ["batch_queue_p99_s", "batch_queue_mean_s", "gateway_queue_wait_p99_s"],
        "Queueing (server)",
        "seconds",
    ),
    "server_latency": (
        [
            "model_time_mean_s",
            "modelserver_latency_mean_s",
            "gateway_latency_mean_s",
            "gateway_latency_p99_s",
        ],
        "Server latency and model time",
        "seconds",
    ),
    "utilisation": (
        ["gpu_utilization", "process_cpu_cores"],
        "GPU utilisation / server process CPU",
        "ratio / cores",
    ),
}


def _median_at(runs: list[dict[str, Any]], xs: list[Any], x: Any, key: str) -> float:
    values = sorted(
        v
        for r, rx in zip(runs, xs, strict=True)
        if rx == x and (v := r["client"]["latency_s"].get(key)) is not None
    )
    if not values:
        return float("nan")
    mid = len(values) // 2
    return float(values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2)


def plot_curve(doc: dict[str, Any]) -> bytes:
    """Latency (p50, SLO quantile) and goodput against the offered rate or concurrency."""
    runs = doc["runs"]
    closed = runs[0]["mode"] == "closed"
    q = doc["slo"]["quantile"]
    xs = [r["concurrency"] if closed else r["client"]["offered_rate"] for r in runs]
    order = sorted(range(len(runs)), key=lambda i: xs[i])
    fig, (ax,) = _figure()
    levels = sorted(set(xs))  # repeats at one level: every run a dot, the line through medians
    for key, color in (("p50", COLORS[0]), (q, COLORS[2])):
        ys = [runs[i]["client"]["latency_s"].get(key) for i in order]
        ax.scatter(
            [xs[i] for i in order],
            [float("nan") if y is None else y for y in ys],
            s=9,
            color=color,
        )
        ax.plot(
            levels, [_median_at(runs, xs, x, key) for x in levels], label=key, color=color, lw=1
        )
    held = [runs[i]["client"]["slo"]["held"] for i in order]
    ax.scatter(
        [xs[i] for i, h in zip(order, held, strict=True) if not h],
        [
            runs[i]["client"]["latency_s"].get(q) or 0
            for i, h in zip(order, held, strict=True)
            if not h
        ],
        marker="x",
        color="black",
        zorder=5,
        label="broke the SLO",
    )
    ax.axhline(doc["slo"]["latency_s"], color="#d62728", ls="--", lw=0.8, label="SLO")
    ax.set_yscale("log")
    ax.set(
        xlabel="concurrency" if closed else "offered rate, requests/s",
        ylabel="latency, s",
        title="Latency vs " + ("concurrency" if closed else "rate"),
    )
    ax2 = ax.twinx()
    ax2.plot(
        [xs[i] for i in order],
        [runs[i]["client"]["goodput_rps"] for i in order],
        color=COLORS[3],
        lw=0.8,
        ls=":",
        marker=".",
        label="goodput/s",
    )
    ax2.set_ylabel("goodput, requests/s")
    lines, lines2 = ax.get_legend_handles_labels(), ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7, loc="upper left")
    return _png(fig)


def plot_scenario(rows: list[dict[str, Any]]) -> bytes:
    """Mean and p99 per server, side by side."""
    fig, (ax,) = _figure()
    names = [r["server"] for r in rows]
    width = 0.38
    for j, (key, color) in enumerate((("mean_s", COLORS[0]), ("p99_s", COLORS[2]))):
        vals = [(r[key] or 0) * 1000 for r in rows]
        pos = [i + (j - 0.5) * width for i in range(len(rows))]
        bars = ax.bar(pos, vals, width, label=key.replace("_s", ""), color=color)
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
    ax.set_xticks(range(len(rows)), names, fontsize=8)
    ax.set(ylabel="latency, ms", title="Seed scenario: the same load on three servers")
    ax.legend(fontsize=7)
    return _png(fig)


def plots(doc: dict[str, Any]) -> dict[str, bytes]:
    """name -> PNG bytes of every plot the document has data for."""
    runs = doc["runs"]
    out: dict[str, bytes] = {}
    if doc.get("scenario"):
        out["scenario"] = plot_scenario(doc["scenario"]["rows"])
    if not runs:
        return out
    out["latency"] = plot_latency(runs, doc["slo"]["latency_s"])
    out["throughput"] = plot_throughput(runs)
    out["errors"] = plot_errors(runs)
    for name, (keys, title, ylabel) in SERVER_PLOTS.items():
        if has_server(runs, keys):
            out[name] = _plot_server(runs, keys, title, ylabel)
    if len(runs) > 1 and doc["kind"] in ("sweep", "find_max"):
        out["latency_vs_rate"] = plot_curve(doc)
    return out


# ---- text --------------------------------------------------------------------------------


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v * 1000:.1f}"


def _num(v: Any, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def _streamed_ms(figure: Any, key: str) -> str:
    """A TTFT/ITL quantile in ms; "n/a" for unary runs (the figure is then a sentence)."""
    return _ms(figure.get(key)) if isinstance(figure, dict) else "n/a"


def run_rows(doc: dict[str, Any]) -> list[list[str]]:
    """The client table: one row per run."""
    q = doc["slo"]["quantile"]
    rows = []
    for r in doc["runs"]:
        c = r["client"]
        lat = c["latency_s"]
        rows.append(
            [
                r["label"],
                _num(c["offered_rate"]),
                _num(c["throughput_rps"]),
                _num(c["goodput_rps"]),
                _num(c["output_tokens_per_s"], "{:.1f}"),
                _ms(lat["mean"]),
                _ms(lat["p50"]),
                _ms(lat["p90"]),
                _ms(lat[q]),
                _ms(lat["max"]),
                _streamed_ms(c["ttft_s"], "p50"),
                _streamed_ms(c["ttft_s"], "p99"),
                _streamed_ms(c["itl_s"], "mean"),
                str(c["errors"]),
                str(c["sheds"]),
                ", ".join(f"{k}: {v}" for k, v in c["by_status"].items()),
                "held" if c["slo"]["held"] else "BROKE: " + "; ".join(c["slo"]["reasons"]),
            ]
        )
    return rows


RUN_HEADER = [
    "run",
    "offered/s",
    "ok/s",
    "goodput/s",
    "tokens/s",
    "mean ms",
    "p50 ms",
    "p90 ms",
    "SLO-q ms",
    "max ms",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "ITL mean ms",
    "errors",
    "sheds",
    "by status",
    "SLO",
]


def headline(doc: dict[str, Any]) -> list[str]:
    """The few lines printed at the end and shown at the top of the report."""
    lines = []
    if doc.get("scenario"):
        sc = doc["scenario"]
        lines.append(sc["note"])
        for r in sc["rows"]:
            lines.append(
                f"{r['server']}: mean {_ms(r['mean_s'])} ms, p99 {_ms(r['p99_s'])} ms, "
                f"{_num(r['throughput_rps'])} ok/s, errors {r['errors']}"
            )
        return lines
    fm = doc.get("find_max")
    if fm is not None:
        q = doc["slo"]["quantile"]
        lines.append(
            f"find-max: highest rate holding the SLO ({q} <= {doc['slo']['latency_s']:g}s, "
            f"errors <= {doc['slo']['error_ratio']:g}): {fm['max_rate']:g}/s; first broken: "
            f"{'-' if fm['first_broken'] is None else format(fm['first_broken'], 'g')}/s "
            f"({len(fm['probes'])} runs)"
        )
    for r in doc["runs"][-3:] if fm is None else []:
        c = r["client"]
        lines.append(
            f"{r['label']}: {c['requests']} requests, ok/s {_num(c['throughput_rps'])}, goodput/s "
            f"{_num(c['goodput_rps'])}, p50 {_ms(c['latency_s']['p50'])} ms, p99 "
            f"{_ms(c['latency_s']['p99'])} ms, errors {c['errors']}, sheds {c['sheds']}, SLO "
            f"{'held' if c['slo']['held'] else 'broke'}"
            + (
                f", TTFT p50 {_streamed_ms(c['ttft_s'], 'p50')} ms p99 "
                f"{_streamed_ms(c['ttft_s'], 'p99')} ms"
                if isinstance(c["ttft_s"], dict)
                else ""
            )
        )
    for r in doc["runs"]:
        lines += [f"! {r['label']}: {f}" for f in r["flags"]]
    return lines


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _server_table(doc: dict[str, Any]) -> str:
    runs = doc["runs"]
    keys = [k for k in FIGURES if any(r["server"]["summary"].get(k) is not None for r in runs)]
    if not keys:
        notes = sorted({n for r in runs for n in r["server"]["notes"]})
        return "<p>No server-side figures: " + html.escape("; ".join(notes) or "none") + "</p>"
    header = ["run", "source", *(FIGURES[k] for k in keys)]
    rows = [
        [
            r["label"],
            r["server"]["source"],
            *(_num(r["server"]["summary"].get(k), "{:.4g}") for k in keys),
        ]
        for r in runs
    ]
    return _table(header, rows)


STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1100px;color:#222}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#f3f3f3}
td:first-child{text-align:left}.flag{color:#a40000}.ok{color:#060}
pre{background:#f6f6f6;padding:.5em;font-size:11px;white-space:pre-wrap}
img{max-width:100%;display:block;margin:.4em 0}
"""


def render_html(doc: dict[str, Any], images: dict[str, bytes]) -> str:
    """The self-contained report page."""
    e = html.escape
    parts = [
        f"<!doctype html><meta charset='utf-8'><title>TokenPulse load test</title>"
        f"<style>{STYLE}</style><h1>TokenPulse load test: {e(doc['kind'])}</h1>"
    ]
    target = doc.get("target", {})
    slo = doc["slo"]
    parts.append(
        f"<p>Target <code>{e(str(target.get('url', '-')))}</code>, route "
        f"<code>{e(str(target.get('route', '-')))}</code>; started "
        f"{e(time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(doc['started_unix'])))}. SLO "
        f"({e(slo['source'])}): {e(slo['quantile'])} latency &le; {slo['latency_s']:g} s, "
        f"errors+sheds &le; {slo['error_ratio']:g}. Latency is measured from each request's "
        "intended send time (no coordinated omission). TTFT and inter-token latency: n/a "
        "(unary requests; no streaming route yet).</p>"
    )
    parts.append(
        "<ul>"
        + "".join(
            f"<li class='{'flag' if line.startswith('!') else 'ok'}'>{e(line)}</li>"
            for line in headline(doc)
        )
        + "</ul>"
    )
    if doc.get("scenario"):
        sc = doc["scenario"]
        parts.append("<h2>Seed scenario</h2><p>" + e(sc["note"]) + "</p>")
        parts.append(
            _table(
                ["server", "mean ms", "p50 ms", "p99 ms", "ok/s", "errors", "batch size"],
                [
                    [
                        r["server"],
                        _ms(r["mean_s"]),
                        _ms(r["p50_s"]),
                        _ms(r["p99_s"]),
                        _num(r["throughput_rps"]),
                        str(r["errors"]),
                        _num(r.get("batch_size")),
                    ]
                    for r in sc["rows"]
                ],
            )
        )
    fm = doc.get("find_max")
    if fm is not None:
        parts.append("<h2>Capacity search</h2>")
        parts.append(
            _table(
                ["rate/s", "repeat", "held", "why not"],
                [
                    [
                        f"{p['rate']:g}",
                        str(p["repeat"] + 1),
                        "yes" if p["held"] else "no",
                        "; ".join(p["reasons"]),
                    ]
                    for p in fm["probes"]
                ],
            )
        )
        if fm.get("stopped"):
            parts.append(f"<p class='flag'>Stopped early: {e(fm['stopped'])}</p>")
    if doc["runs"]:
        parts.append("<h2>Client-side figures</h2>")
        header = [h.replace("SLO-q", slo["quantile"]) for h in RUN_HEADER]
        parts.append(_table(header, run_rows(doc)))
        parts.append("<h2>Server-side figures</h2>" + _server_table(doc))
        gen = [
            [
                r["label"],
                _num(r["generator"]["max_cpu"]),
                _ms(r["generator"]["max_loop_lag_s"]),
                _ms(r["client"]["send_lag_s"]["p99"]),
                r["generator"]["saturated"] or "no",
            ]
            for r in doc["runs"]
        ]
        parts.append(
            "<h2>Load generator health</h2>"
            + _table(
                ["run", "max CPU (cores)", "max loop lag ms", "send lag p99 ms", "saturated"], gen
            )
        )
    parts.append("<h2>Plots</h2>")
    for name, png in images.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(
            f"<h3>{e(name.replace('_', ' '))}</h3>"
            f"<img alt='{e(name)}' src='data:image/png;base64,{data}'>"
        )
    cmd = doc.get("command", {})
    parts.append(
        "<h2>Command and versions</h2><pre>"
        + e(f"invoked:    {cmd.get('invoked')}\nequivalent: {cmd.get('equivalent')}")
        + "</pre><pre>"
        + e(json.dumps(doc.get("versions", {}), indent=2))
        + "</pre>"
    )
    return "\n".join(parts)


def _write_requests(path: Path, doc: dict[str, Any]) -> None:
    """Every request (run, intended and sent offsets, latency, status) as gzipped CSV; the
    per-request columns leave the runs, so summary.json stays small."""
    tables = [(r["label"], r.pop("outcomes")) for r in doc["runs"] if "outcomes" in r]
    if not tables:
        return
    with gzip.open(path, "wt", newline="") as f:
        out = csv.writer(f)
        out.writerow(["run", "intended_s", "sent_s", "latency_s", "status"])
        for label, t in tables:
            for row in zip(t["intended_s"], t["sent_s"], t["latency_s"], t["label"], strict=True):
                out.writerow([label, *row])


def write(directory: Path, doc: dict[str, Any]) -> Path:
    """Write the report directory; returns the path of report.html."""
    directory.mkdir(parents=True, exist_ok=True)
    doc.setdefault("started_unix", doc["runs"][0]["started_unix"] if doc["runs"] else time.time())
    doc.setdefault("versions", versions())
    doc["schema"] = 1
    images = plots(doc)
    for old in directory.glob("*.png"):
        old.unlink()
    for name, png in images.items():
        (directory / f"{name}.png").write_bytes(png)
    _write_requests(directory / "requests.csv.gz", doc)
    (directory / "summary.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    cmd = doc.get("command", {})
    (directory / "command.txt").write_text(
        f"# as invoked (API keys redacted)\n{cmd.get('invoked') or '(called from Python)'}\n"
        f"# the settings as one command\n{cmd.get('equivalent')}\n"
    )
    (directory / "versions.json").write_text(json.dumps(doc["versions"], indent=2) + "\n")
    page = directory / "report.html"
    page.write_text(render_html(doc, images), encoding="utf-8")
    return page
