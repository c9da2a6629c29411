"""The exporter's own alerts: its target down, a collector failing."""

from __future__ import annotations

from monitoring.mixin.alerts.common import MODELSERVER_COLLECTORS, down
from monitoring.mixin.config import MixinConfig
from monitoring.mixin.model import Alert


def alerts(cfg: MixinConfig) -> list[Alert]:
    """The exporter down; a collector failing (those that read the model server only while it
    is up: down, it is its own page)."""
    tfs_down = f"up{cfg.sel('modelserver')} == 0"
    reads = cfg.sel("exporter", f'collector=~"{MODELSERVER_COLLECTORS}"')
    others = cfg.sel("exporter", f'collector!~"{MODELSERVER_COLLECTORS}"')
    return [
        down(cfg, "exporter", "Exporter", "warning", "The exporter"),
        Alert(
            "ExporterCollectorFailing",
            # the collectors that read the model server fail while it is down, its own page: not
            # pending then, so a restart cannot race this alert's resolve against TfServingDown's
            f"tokenpulse_exporter_collector_success{others} == 0\n"
            f"or (tokenpulse_exporter_collector_success{reads} == 0\n"
            f"unless on ({cfg.replica_label}) ({tfs_down}))",
            cfg.collector_for,
            "warning",
            "An exporter collector keeps failing.",
            "Collector {{ $labels.collector }} of the exporter at {{ $labels.instance }} has "
            "failed every scrape: its series are missing or stale.",
            per_replica=True,
        ),
    ]
