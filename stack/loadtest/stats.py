"""Client-side figures from Outcomes: percentiles, throughput, goodput, errors, time series."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from monitoring.mixin import config
from monitoring.mixin.config import DEFAULT as mixin
from stack.loadtest.client import Outcome

QUANTILES = (0.5, 0.9, 0.95, 0.99)
NA = "n/a (unary requests: run --interaction stream to measure it)"


def _slo(name: str) -> config.Slo:
    (slo,) = [s for s in mixin.slos if s.name == name]
    return slo


@dataclass(frozen=True)
class Slo:
    """The verdict's bounds: p(objective) latency under `latency_s`, errors under a share."""

    latency_s: float
    latency_objective: float
    error_ratio: float
    source: str

    @classmethod
    def from_mixin(cls, latency_s: float | None = None, error_ratio: float | None = None) -> Slo:
        """The mixin's latency and availability SLOs (monitoring/mixin/config.py), overridable."""
        lat, avail = _slo("latency"), _slo("availability")
        given = latency_s is not None or error_ratio is not None
        return cls(
            latency_s=latency_s if latency_s is not None else float(lat.threshold_le),
            latency_objective=lat.objective,
            error_ratio=error_ratio if error_ratio is not None else round(1 - avail.objective, 6),
            source=("flags over " if given else "") + "monitoring/mixin/config.py",
        )

    @property
    def quantile_name(self) -> str:
        """e.g. p99."""
        return f"p{self.latency_objective * 100:g}"


def quantile(values: Sequence[float], q: float) -> float | None:
    """The `q` quantile (0 <= q <= 1), linear between the closest ranks; None without values."""
    if not 0 <= q <= 1:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    return float(np.quantile(np.asarray(values, dtype=float), q)) if len(values) else None


def quantiles(values: Sequence[float], qs: Sequence[float] = QUANTILES) -> dict[str, float | None]:
    """{'p50': ..., ...}; None without values."""
    return {f"p{q * 100:g}": quantile(values, q) for q in qs}


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None or math.isnan(value) else round(value, digits)


def _streamed(values: Sequence[float | None]) -> dict[str, float | None] | str:
    """Mean, p50 and p99 of a streaming-only figure; NA when no request measured it."""
    seen = [v for v in values if v is not None]
    if not seen:
        return NA
    return {
        "mean": _round(float(np.mean(seen))),
        **{k: _round(v) for k, v in quantiles(seen, (0.5, 0.99)).items()},
    }


def summarize(
    outcomes: Sequence[Outcome], window_s: float, slo: Slo, offered_rate: float | None = None
) -> dict[str, Any]:
    """The run's client-side figures over `window_s` seconds (the schedule's length)."""
    window_s = max(window_s, 1e-9)
    ok = [o for o in outcomes if o.ok]
    lat = [o.latency_s for o in ok]
    errors = [o for o in outcomes if not o.ok and not o.shed]
    sheds = [o for o in outcomes if o.shed]
    good = [o for o in ok if o.latency_s <= slo.latency_s]
    lag = [o.sent - o.intended for o in outcomes]
    server = [o.server_s for o in ok if o.server_s is not None]
    n = len(outcomes)
    q_lat = quantiles(lat)
    q_slo = quantiles(lat, (slo.latency_objective,))[slo.quantile_name]
    error_ratio = (len(errors) + len(sheds)) / n if n else 0.0
    return {
        "requests": n,
        "ok": len(ok),
        "errors": len(errors),
        "sheds": len(sheds),
        "by_status": dict(sorted(Counter(o.label for o in outcomes).items())),
        "offered_rate": _round(offered_rate if offered_rate is not None else n / window_s, 4),
        "throughput_rps": _round(len(ok) / window_s, 4),
        "goodput_rps": _round(len(good) / window_s, 4),
        "output_tokens_per_s": _round(sum(o.output_tokens for o in ok) / window_s, 3),
        "prompt_tokens_per_s": _round(sum(o.prompt_tokens for o in ok) / window_s, 3),
        "error_ratio": _round(error_ratio),
        "latency_s": {
            "mean": _round(float(np.mean(lat)) if lat else None),
            **{k: _round(v) for k, v in q_lat.items()},
            "max": _round(max(lat) if lat else None),
            slo.quantile_name: _round(q_slo),
        },
        "server_latency_s": {
            "mean": _round(float(np.mean(server)) if server else None),
            **{k: _round(v) for k, v in quantiles(server, (0.5, 0.99)).items()},
        },
        "send_lag_s": {
            "p99": _round(quantiles(lag, (0.99,))["p99"]),
            "max": _round(max(lag) if lag else None),
        },
        "ttft_s": _streamed([o.ttft_s for o in ok]),
        "itl_s": _streamed([o.itl_s for o in ok]),
        "slo": verdict(q_slo, error_ratio, slo, n),
    }


def verdict(latency_q: float | None, error_ratio: float, slo: Slo, requests: int) -> dict[str, Any]:
    """Whether a run held the SLO, and why not."""
    reasons = []
    if requests == 0:
        reasons.append("no requests")
    if latency_q is None and requests:
        reasons.append("no successful request")
    elif latency_q is not None and latency_q > slo.latency_s:
        reasons.append(f"{slo.quantile_name} {latency_q:.3f}s > {slo.latency_s:g}s")
    if error_ratio > slo.error_ratio:
        reasons.append(f"error+shed ratio {error_ratio:.4f} > {slo.error_ratio:g}")
    return {"held": not reasons, "reasons": reasons}


def timeseries(outcomes: Sequence[Outcome], start: float, bucket_s: float = 1.0) -> dict[str, Any]:
    """Per-bucket figures by intended send time: latency quantiles (ok requests), sent, ok,
    output tokens and non-ok labels; `t` is seconds from `start`."""
    if not outcomes:
        return {
            "t": [],
            "p50": [],
            "p90": [],
            "p99": [],
            "sent": [],
            "ok": [],
            "tokens": [],
            "errors": {},
        }
    buckets = int(max(o.intended - start for o in outcomes) // bucket_s) + 1
    lat: list[list[float]] = [[] for _ in range(buckets)]
    sent, ok, tokens = [0] * buckets, [0] * buckets, [0] * buckets
    errors: dict[str, list[int]] = {}
    for o in outcomes:
        i = max(0, int((o.intended - start) // bucket_s))
        sent[i] += 1
        if o.ok:
            ok[i] += 1
            tokens[i] += o.output_tokens
            lat[i].append(o.latency_s)
        else:
            errors.setdefault(o.label, [0] * buckets)[i] += 1
    qs = [quantiles(v, (0.5, 0.9, 0.99)) for v in lat]
    return {
        "t": [round(i * bucket_s, 3) for i in range(buckets)],
        "p50": [_round(q["p50"]) for q in qs],
        "p90": [_round(q["p90"]) for q in qs],
        "p99": [_round(q["p99"]) for q in qs],
        "sent": [s / bucket_s for s in sent],
        "ok": [s / bucket_s for s in ok],
        "tokens": [s / bucket_s for s in tokens],
        "errors": {k: [v / bucket_s for v in vs] for k, vs in sorted(errors.items())},
    }
