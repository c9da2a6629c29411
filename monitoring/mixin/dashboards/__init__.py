"""Grafana dashboards as code, built with grafana-foundation-sdk from a mixin config.

`render_all(cfg)` gives each dashboard's JSON text by file name; `tokenpulse build` writes the
local config's to `dashboards/`, where they are committed (`tokenpulse build --check` fails when
they drift), and the cluster's into the Kubernetes ConfigMaps.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from grafana_foundation_sdk.builders.dashboard import Dashboard
from grafana_foundation_sdk.cog.encoder import JSONEncoder

from monitoring.mixin.config import MixinConfig
from monitoring.mixin.dashboards import gpu, overview, pipeline, quality, serving, training

# config key of the dashboard's UID -> its builder, in the order SREs read them
BUILDERS: dict[str, Callable[[MixinConfig], Dashboard]] = {
    "slo": overview.build,
    "serving": serving.build,
    "quality": quality.build,
    "gpu": gpu.build,
    "pipeline": pipeline.build,
    "training": training.build,
}


def build_model(cfg: MixinConfig, key: str) -> dict[str, Any]:
    """One dashboard as a JSON-ready dict, panel ids numbered in reading order from 1."""
    model: dict[str, Any] = json.loads(JSONEncoder().encode(BUILDERS[key](cfg).build()))
    for number, panel in enumerate(model.get("panels", []), start=1):
        panel["id"] = number
    return model


def render(model: dict[str, Any]) -> str:
    """The committed text of a dashboard: sorted keys, two-space indent, trailing newline."""
    return json.dumps(model, indent=2, sort_keys=True) + "\n"


def build_models(cfg: MixinConfig) -> dict[str, dict[str, Any]]:
    """Every dashboard's model by its key (a cfg.dashboard_uids key), in reading order."""
    return {key: build_model(cfg, key) for key in BUILDERS}


def render_all(cfg: MixinConfig) -> dict[str, str]:
    """File name (`<uid>.json`) -> JSON text, for every dashboard."""
    return {f"{m['uid']}.json": render(m) for m in build_models(cfg).values()}
