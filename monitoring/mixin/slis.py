"""The SLIs, written once: the recording rules record them per model and window, and the SLO
dashboard draws the same expressions over the SLO period for the chosen models and versions."""

from __future__ import annotations

from monitoring.mixin.config import MixinConfig, Slo
from monitoring.mixin.model import GATEWAY_PREFIX

REQUESTS = f"{GATEWAY_PREFIX}requests_total"
DURATION = f"{GATEWAY_PREFIX}request_duration_seconds"
TPOT = f"{GATEWAY_PREFIX}time_per_output_token_seconds"
TTFT = f"{GATEWAY_PREFIX}time_to_first_token_seconds"  # observed for streams only
# a latency SLI counts answered requests only: an error is the availability SLI's business
ANSWERED = 'code=~"2.."'


def _agg(by: str) -> str:
    return f"sum by ({by})" if by else "sum"


def _sel(matchers: str, *extra: str) -> str:
    return "{" + ",".join(m for m in (matchers, *extra) if m) + "}"


def share(bad: str, total: str, by: str = "model") -> str:
    """bad / total summed `by`; with traffic and no bad events it is 0, not nothing."""
    agg = _agg(by)
    return f"({agg} ({bad}) or {agg} ({total}) * 0) / {agg} ({total})"


def _slow_share(metric: str, le: str, matchers: str, window: str, by: str) -> str:
    agg = _agg(by)
    bound = f'le="{le}"'
    good = f"rate({metric}_bucket{_sel(matchers, bound)}[{window}])"
    return f"1 - {agg} ({good}) / {agg} (rate({metric}_count{_sel(matchers)}[{window}]))"


def error_ratio(cfg: MixinConfig, slo: Slo, window: str, matchers: str, by: str = "model") -> str:
    """Share of bad events of an SLO over `window`, for the series `matchers` selects.

    `matchers` is the inside of a label selector (e.g. `job="tokenpulse-gateway"`); `by` is the
    grouping of the result ("" sums everything into one series).
    """
    if slo.name == "availability":
        errors = f'code=~"{cfg.error_codes}"'
        bad = f"rate({REQUESTS}{_sel(matchers, errors)}[{window}])"
        return share(bad, f"rate({REQUESTS}{_sel(matchers)}[{window}])", by)
    if slo.name == "latency":
        return _slow_share(DURATION, slo.threshold_le, _sel(matchers, ANSWERED)[1:-1], window, by)
    if slo.name == "tpot":
        return _slow_share(TPOT, slo.threshold_le, matchers, window, by)
    if slo.name == "ttft":
        return _slow_share(TTFT, slo.threshold_le, matchers, window, by)
    raise KeyError(f"no SLI for SLO {slo.name!r}")
