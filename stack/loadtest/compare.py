"""`--against`: this report beside an earlier one, metric by metric, with deltas and a verdict.

Each side is summarised by its headline: the find-max rate when there is one, else the mean of
its runs' client figures (a sweep's runs are matched by label, so both must sweep the same
values). A change counts when it is larger than `THRESHOLD` (relative) in either direction.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from stack.loadtest.engine import LoadtestError

THRESHOLD = 0.05
# metric -> (how to read it from a run's client figures, whether higher is better)
METRICS: dict[str, tuple[tuple[str, ...], bool]] = {
    "latency mean s": (("latency_s", "mean"), False),
    "latency p50 s": (("latency_s", "p50"), False),
    "latency p99 s": (("latency_s", "p99"), False),
    "throughput ok/s": (("throughput_rps",), True),
    "goodput/s": (("goodput_rps",), True),
    "output tokens/s": (("output_tokens_per_s",), True),
    "error+shed ratio": (("error_ratio",), False),
}
SERVER = {"server batch size": ("batch_size_mean", True)}


def load(directory: Path) -> dict[str, Any]:
    """A report's summary.json."""
    path = directory / "summary.json"
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        raise LoadtestError(f"--against {directory}: no readable summary.json ({exc})") from None


def _get(doc: dict[str, Any], path: tuple[str, ...]) -> float | None:
    for key in path:
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return float(doc) if isinstance(doc, int | float) else None


def _mean(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got else None


def headline_figures(doc: dict[str, Any]) -> dict[str, tuple[float | None, bool]]:
    """metric -> (value, higher is better) for one report."""
    runs = doc.get("runs", [])
    out: dict[str, tuple[float | None, bool]] = {}
    fm = doc.get("find_max")
    if fm is not None:
        out["max rate held /s"] = (fm.get("max_rate"), True)
        runs = [r for r in runs if r["rate"] == fm.get("max_rate")] or runs[:0]
    for name, (path, higher) in METRICS.items():
        out[name] = (_mean([_get(r["client"], path) for r in runs]), higher)
    for name, (key, higher) in SERVER.items():
        out[name] = (_mean([r["server"]["summary"].get(key) for r in runs]), higher)
    return out


def compare(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """Rows of (metric, old, new, delta, relative, judgement) and the overall verdict."""
    a, b = headline_figures(old), headline_figures(new)
    rows: list[dict[str, Any]] = []
    better: list[str] = []
    worse: list[str] = []
    for name, (new_value, higher) in b.items():
        old_value = a.get(name, (None, higher))[0]
        if old_value is None or new_value is None:
            rows.append(
                {
                    "metric": name,
                    "old": old_value,
                    "new": new_value,
                    "delta": None,
                    "relative": None,
                    "judgement": "n/a",
                }
            )
            continue
        delta = new_value - old_value
        rel = delta / abs(old_value) if old_value else (0.0 if not delta else float("inf"))
        judgement = "same"
        if abs(rel) > THRESHOLD and abs(delta) > 1e-9:
            judgement = "better" if (delta > 0) == higher else "worse"
            (better if judgement == "better" else worse).append(name)
        rows.append(
            {
                "metric": name,
                "old": old_value,
                "new": new_value,
                "delta": delta,
                "relative": rel,
                "judgement": judgement,
            }
        )
    if worse and better:
        verdict = f"mixed: better {', '.join(better)}; worse {', '.join(worse)}"
    elif worse:
        verdict = f"worse: {', '.join(worse)}"
    elif better:
        verdict = f"better: {', '.join(better)}"
    else:
        verdict = f"no change beyond {THRESHOLD:.0%}"
    if new.get("kind") != old.get("kind"):
        verdict += f" (note: comparing a {new.get('kind')} with a {old.get('kind')})"
    return {"rows": rows, "verdict": verdict, "threshold": THRESHOLD}


def lines(result: dict[str, Any]) -> list[str]:
    """The comparison as text."""
    out = [f"verdict: {result['verdict']}"]
    for r in result["rows"]:
        if r["delta"] is None:
            continue
        out.append(
            f"  {r['metric']}: {r['old']:.4g} -> {r['new']:.4g} "
            f"({r['relative']:+.1%}, {r['judgement']})"
        )
    return out


def _plot(result: dict[str, Any]) -> bytes:
    from stack.loadtest.report import _figure, _png

    rows = [r for r in result["rows"] if r["relative"] is not None]
    fig, (ax,) = _figure()
    colors = {"better": "#2ca02c", "worse": "#d62728", "same": "#7f7f7f"}
    ax.barh(
        [r["metric"] for r in rows],
        [r["relative"] * 100 for r in rows],
        color=[colors[r["judgement"]] for r in rows],
    )
    ax.axvline(0, color="black", lw=0.6)
    ax.set(xlabel="change vs the earlier report, %", title="This run against the earlier one")
    return _png(fig)


def write(new_dir: Path, old_dir: Path) -> dict[str, Any]:
    """Compare two report directories; writes compare.html/.png/.json into `new_dir`."""
    new, old = load(new_dir), load(old_dir)
    result = compare(new, old)
    result["old"], result["new"] = str(old_dir), str(new_dir)
    png = _plot(result)
    (new_dir / "compare.png").write_bytes(png)
    (new_dir / "compare.json").write_text(json.dumps(result, indent=1) + "\n")
    e = html.escape

    def f(v: float | None, pct: bool = False) -> str:
        return "-" if v is None else (f"{v:+.1%}" if pct else f"{v:.4g}")

    body = "".join(
        f"<tr><td>{e(r['metric'])}</td><td>{f(r['old'])}</td><td>{f(r['new'])}</td>"
        f"<td>{f(r['delta'])}</td><td>{f(r['relative'], True)}</td><td>{e(r['judgement'])}</td>"
        "</tr>"
        for r in result["rows"]
    )
    page = (
        "<!doctype html><meta charset='utf-8'><title>TokenPulse load test comparison</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:"
        "collapse}td,th{border:1px solid #ccc;padding:2px 6px}</style>"
        f"<h1>Comparison</h1><p>Earlier: <code>{e(str(old_dir))}</code> ({e(old.get('kind', ''))})"
        f"; this: <code>{e(str(new_dir))}</code> ({e(new.get('kind', ''))}).</p>"
        f"<p><b>Verdict: {e(result['verdict'])}</b> (threshold {THRESHOLD:.0%})</p>"
        "<table><tr><th>metric</th><th>earlier</th><th>this</th><th>delta</th><th>change</th>"
        f"<th>judgement</th></tr>{body}</table>"
        f"<img alt='comparison' src='data:image/png;base64,{base64.b64encode(png).decode()}'>"
    )
    (new_dir / "compare.html").write_text(page, encoding="utf-8")
    return result
