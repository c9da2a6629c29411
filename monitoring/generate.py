"""Every file the mixin config drives, as (path relative to the repository root, text).

The recording and alerting rules (plus their time-compressed copies for tests), the Alertmanager
configs (deployment and local), the compose Prometheus config and the Grafana dashboards, all
rendered with one MixinConfig (the committed files: the local stack's, `MixinConfig.local()`).
`tokenpulse build` writes them, or checks them with `--check`.
"""

from __future__ import annotations

from pathlib import Path

from monitoring.mixin import alertmanager, prometheus, rulefiles
from monitoring.mixin.config import MixinConfig
from monitoring.mixin.dashboards import build as dashboards
from monitoring.mixin.dashboards import build_models
from tokenpulse import paths, ports

ALERTS = paths.ALERTS.relative_to(paths.ROOT)
COMPRESSED = paths.COMPRESSED_ALERTS.relative_to(paths.ROOT)
ALERTMANAGER = Path("monitoring/alertmanager")
PROMETHEUS = Path("monitoring/prometheus")
# where the local on-call receiver listens (`tokenpulse oncall-receiver`'s default)
ONCALL_URL = f"http://127.0.0.1:{ports.ONCALL}"


def files(cfg: MixinConfig) -> dict[Path, str]:
    """Every generated monitoring file (path relative to the repository root) and its text."""
    out: dict[Path, str] = {}
    models = build_models(cfg)
    for name, text in rulefiles.render_files(cfg, models).items():
        out[ALERTS / name] = text
    for name, text in rulefiles.render_files(cfg, models, compressed=True).items():
        out[COMPRESSED / name] = text
    out[ALERTMANAGER / "alertmanager.yml"] = alertmanager.render(cfg)
    out[ALERTMANAGER / "alertmanager.local.yml"] = alertmanager.render_local(cfg, ONCALL_URL)
    out.update({PROMETHEUS / name: text for name, text in prometheus.compose_files(cfg).items()})
    out.update(dashboards.files(cfg))
    return out
