"""Alerting rules from the mixin config, one module per component (as the runbooks and panels).

Every alert gets `for`, `severity`, a static summary, a templated description and a runbook URL
from the config's links; `symptom=True` marks alerts that a down model server (or a model with no
AVAILABLE version) explains, which Alertmanager then inhibits.
"""

from __future__ import annotations

from monitoring.mixin.alerts import (
    canary,
    exporter,
    gateway,
    gpu,
    meta,
    pipeline,
    quality,
    tfserving,
    training,
)
from monitoring.mixin.config import MixinConfig
from monitoring.mixin.model import Alert
from monitoring.mixin.promql import Timing


def all_alerts(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """Every alert, in rule-file order: one group per component, in the order SREs read them."""
    return [
        *gateway.alerts(cfg, t),
        *quality.alerts(cfg, t),
        *canary.alerts(cfg),
        *tfserving.alerts(cfg, t),
        *exporter.alerts(cfg),
        *pipeline.shipper_alerts(cfg, t),
        *gpu.alerts(cfg, t),
        *pipeline.spool_alerts(cfg, t),
        *training.alerts(cfg, t),
        *meta.alerts(cfg, t),
    ]
