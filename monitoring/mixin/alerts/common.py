"""Guards and shapes more than one component's alerts share: traffic guards, a target down."""

from __future__ import annotations

from monitoring.mixin.config import MixinConfig
from monitoring.mixin.model import GATEWAY_PREFIX, Alert
from monitoring.mixin.promql import Timing, number

# the exporter's collectors that read the model server (they fail while it is down)
MODELSERVER_COLLECTORS = "tfserving|canary"


def traffic(cfg: MixinConfig, window: str, metric: str = "requests_total") -> str:
    """The minimum-traffic guard: the model had enough requests in the window."""
    rate = f"rate({GATEWAY_PREFIX}{metric}{cfg.sel('gateway')}[{window}])"
    return f"sum by (model) ({rate}) > {number(cfg.min_request_rate)}"


def min_events(cfg: MixinConfig, metric: str, window: str, count: int, extra: str = "") -> str:
    """At least `count` events of a counter in the window, per model."""
    s = cfg.sel("gateway", extra)
    return f"sum by (model) (increase({GATEWAY_PREFIX}{metric}{s}[{window}])) >= {count}"


def down(
    cfg: MixinConfig, component: str, name: str, severity: str, what: str, replica: str = ""
) -> Alert:
    """A scrape target of `component` down; `replica` (text) names it for per-replica targets."""
    return Alert(
        f"{name}Down",
        f"up{cfg.sel(component)} == 0",
        cfg.down_for,
        severity,
        f"{what} cannot be scraped.",
        f"Prometheus cannot scrape {what[0].lower()}{what[1:]} at {{{{ $labels.instance }}}} "
        f"(job {{{{ $labels.job }}}}).{replica}",
        per_replica=bool(replica),
    )


def in_flight_per_replica(cfg: MixinConfig, window: str) -> str:
    """Mean predict calls in flight from the gateway per model-server replica that is up."""
    in_flight = f"{GATEWAY_PREFIX}upstream_in_flight_requests{cfg.sel('gateway')}"
    replicas = f"count(up{cfg.sel('modelserver')} == 1)"
    return f"sum(avg_over_time({in_flight}[{window}])) / {replicas}"


def exhausted(cfg: MixinConfig, t: Timing) -> str:
    """Requests/s TF Serving answered RESOURCE_EXHAUSTED, per target and model."""
    status = cfg.sel("modelserver", 'status="RESOURCE_EXHAUSTED"')
    w = t(cfg.resource_exhausted_window)
    return f"rate(:tensorflow:serving:request_count{status}[{w}])"
