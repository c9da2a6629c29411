"""`tokenpulse rollout progressive`: raise the canary's weight in steps while it holds up.

At each step the gateway sends that share of callers to the canary. After `step_s` the canary is
judged against stable: its 5xx ratio and p99 latency over the last `window` (the gateway's
per-version series in Prometheus), and its mean NLL on the exporter's golden prompts (fixed text,
so the versions compare like for like: a model's NLL on its own samples hides a worse model).
A canary that does worse, or that got too few requests to judge, is rolled back on the spot
(weight 0, stable untouched) and the command exits 1. After the last step the canary is promoted:
stable moves to its version (the file keeps the old one, so `rollback` undoes it) and the weight
goes back to 0. Flagger's and Argo Rollouts' analysis loop, for TF Serving labels.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import Field, field_validator

from monitoring.mixin.config import DEFAULT
from stack.rollout.actions import (
    canary_weight,
    gateway_view,
    move_label,
    require_available,
)
from stack.rollout.labels import RolloutError
from stack.rollout.settings import RolloutSettings
from tokenpulse import ports
from tokenpulse.tfserving.config import LABEL_RE

PFX = "tokenpulse_gateway_"
FIVE_XX = ',code=~"5.."'


class ProgressiveSettings(RolloutSettings):
    """What `progressive` adds: pace, data source and the bars the canary must pass."""

    canary_label: str = Field("canary", description="the label of the version under test")
    prometheus_url: str = Field(
        f"http://127.0.0.1:{ports.PROMETHEUS}",
        description="Prometheus scraping the gateway (compose publishes it on the same port)",
    )
    step_s: float = Field(300.0, gt=0, description="seconds each step runs before it is judged")
    window: str = Field("5m", description="PromQL range the step is judged over (<= step_s)")
    min_requests: float = Field(
        20, ge=1, description="canary requests a step needs in the window to be judged"
    )
    max_error_ratio_increase: float = Field(
        0.01, ge=0, description="canary 5xx ratio may exceed stable's by this much"
    )
    max_latency_ratio: float = Field(
        1.5, gt=0, description="canary p99 latency may be this many times stable's"
    )
    max_nll_increase: float = Field(
        DEFAULT.canary_nll_margin, ge=0,
        description="canary golden-prompt NLL (nats per token) may "
        "exceed stable's by this much (the TokenPulseCanaryWorseThanStable margin)",
    )  # fmt: skip
    promote: bool = Field(True, description="after the last step, move stable to the canary")

    @field_validator("canary_label")
    @classmethod
    def _canary_label(cls, value: str) -> str:
        if not LABEL_RE.match(value):
            raise ValueError("version labels use [a-zA-Z0-9_]+")
        return value


@dataclass(frozen=True)
class Health:
    """One version's figures over the window (NaN where there was no data)."""

    requests: float
    error_ratio: float
    p99_s: float
    golden_nll: float


Query = Callable[[str], float]


def prometheus_query(url: str) -> Query:
    """An instant query returning one number (NaN when the result is empty)."""

    def query(expr: str) -> float:
        full = f"{url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        try:
            with urllib.request.urlopen(full, timeout=10) as resp:
                doc = json.loads(resp.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise RolloutError(f"cannot query Prometheus at {url}: {exc}") from exc
        result = doc.get("data", {}).get("result", [])
        return float(result[0]["value"][1]) if result else math.nan

    return query


def health(query: Query, model: str, version: int, window: str) -> Health:
    """A version's requests, 5xx ratio, p99 latency and mean NLL over `window`."""
    sel = f'model="{model}",version="{version}"'

    def rate(name: str, extra: str = "") -> str:
        return f"sum(rate({PFX}{name}{{{sel}{extra}}}[{window}]))"

    return Health(
        requests=query(f"sum(increase({PFX}requests_total{{{sel}}}[{window}]))"),
        # no 5xx series at all is no error: 0 over the requests (NaN only without requests)
        error_ratio=query(
            f"({rate('requests_total', FIVE_XX)} or vector(0)) / {rate('requests_total')}"
        ),
        p99_s=query(
            f"histogram_quantile(0.99, sum by (le) (rate({PFX}request_duration_seconds_bucket"
            f"{{{sel}}}[{window}])))"
        ),
        golden_nll=query(f"max(tokenpulse_canary_mean_nll_nats{{{sel}}})"),
    )


def verdict(s: ProgressiveSettings, stable: Health, canary: Health) -> str | None:
    """Why the canary fails the step; None when it passes."""
    if math.isnan(canary.requests) or canary.requests < s.min_requests:
        got = 0 if math.isnan(canary.requests) else canary.requests
        need = f"{s.min_requests:g} needed"
        return f"too few canary requests to judge ({got:.0f} in {s.window}, {need})"
    base_errors = 0.0 if math.isnan(stable.error_ratio) else stable.error_ratio
    if canary.error_ratio > base_errors + s.max_error_ratio_increase:
        return f"5xx ratio {canary.error_ratio:.3f} vs stable {base_errors:.3f}"
    if canary.p99_s > stable.p99_s * s.max_latency_ratio:  # False while either is NaN
        return f"p99 latency {canary.p99_s:.3f}s vs stable {stable.p99_s:.3f}s"
    if math.isnan(canary.golden_nll) and not math.isnan(stable.golden_nll):
        return "no golden-prompt NLL for the canary (is the exporter running its canaries?)"
    if canary.golden_nll > stable.golden_nll + s.max_nll_increase:
        return f"golden-prompt NLL {canary.golden_nll:.2f} vs stable {stable.golden_nll:.2f} nats"
    return None


def describe(name: str, h: Health) -> str:
    """One line of figures."""
    return (
        f"{name}: {h.requests:.0f} requests, 5xx {h.error_ratio:.3f}, p99 {h.p99_s:.3f}s, "
        f"golden NLL {h.golden_nll:.2f}"
    )


def progressive(
    s: ProgressiveSettings,
    steps: Sequence[float],
    say: Callable[[str], None],
    query: Query | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Run the steps (see the module docstring); RolloutError after a rollback."""
    query = query or prometheus_query(s.prometheus_url)
    labels = gateway_view(s)[1]
    stable, canary = labels.get(s.stable_label), labels.get(s.canary_label)
    if stable is None or canary is None:
        raise RolloutError(
            f"the gateway routes by no {s.stable_label!r} or {s.canary_label!r} label "
            f"({', '.join(f'{k} -> {v}' for k, v in sorted(labels.items())) or 'none'})"
        )
    if stable == canary:
        raise RolloutError(f"{s.stable_label} and {s.canary_label} are both version {stable}")
    require_available(s, canary)
    for percent in steps:
        for line in canary_weight(s, percent):
            say(line)
        sleep(s.step_s)
        base = health(query, s.model, stable, s.window)
        tried = health(query, s.model, canary, s.window)
        say(describe(f"  stable version {stable}", base))
        say(describe(f"  canary version {canary}", tried))
        why = verdict(s, base, tried)
        if why is not None:
            canary_weight(s, 0)
            raise RolloutError(
                f"canary version {canary} failed at {percent:g}%: {why}; rolled back (canary "
                f"weight 0, {s.stable_label} still version {stable})"
            )
        say(f"step {percent:g}%: the canary holds")
    if s.promote:
        for line in move_label(s, s.stable_label, canary):
            say(line)
        canary_weight(s, 0)
        say(f"promoted: {s.stable_label} is version {canary}, canary weight back to 0%")
