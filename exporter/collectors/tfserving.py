"""`tfserving` collector: version states, labels and reachability from TF Serving's status API.

The data comes from `exporter.status.StatusTracker`, which polls in the background; this collector
only reads its latest snapshot, so a scrape never waits on the model server.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from exporter.registry import CollectorError, register
from exporter.sources import Sources
from exporter.status import StatusTracker
from exporter.tfserving_client import VERSION_STATES


class TfServingCollector:
    """State set per version, version behind each label, up, and time of the last state change."""

    def __init__(
        self, tracker: StatusTracker, stale_after_s: float, clock: Callable[[], float] = time.time
    ) -> None:
        self._tracker = tracker
        self._stale_after_s = stale_after_s
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        """Families from the latest poll; raise CollectorError after them if anything failed."""
        snap = self._tracker.snapshot()
        if snap.polled_at is None:
            raise CollectorError("no model status poll yet")
        up = GaugeMetricFamily(
            "tokenpulse_tfserving_up",
            "Whether TF Serving answered the model status request for this model.",
            labels=["model"],
        )
        state = GaugeMetricFamily(
            "tokenpulse_tfserving_model_version_state",
            "State set over TF Serving's version states: 1 for the version's current state.",
            labels=["model", "version", "state"],
        )
        ok = GaugeMetricFamily(
            "tokenpulse_tfserving_model_version_status_ok",
            "Whether the version's status error_code is OK (0 after a failed load).",
            labels=["model", "version"],
        )
        available = GaugeMetricFamily(
            "tokenpulse_tfserving_model_versions_available",
            "How many versions of the model are AVAILABLE.",
            labels=["model"],
        )
        label = GaugeMetricFamily(
            "tokenpulse_tfserving_model_label_version",
            "The version each version label points at, from the model config.",
            labels=["model", "label"],
        )
        version_change = GaugeMetricFamily(
            "tokenpulse_tfserving_model_version_state_change_timestamp_seconds",
            "When the exporter saw this version change state (or first saw it), unix time.",
            labels=["model", "version"],
            unit="seconds",
        )
        model_change = GaugeMetricFamily(
            "tokenpulse_tfserving_model_state_change_timestamp_seconds",
            "When the exporter last saw any version of the model change state, unix time.",
            labels=["model"],
            unit="seconds",
        )
        failures: list[str] = []
        for model in snap.models:
            up.add_metric([model.name], 1.0 if model.up else 0.0)
            for name, version in sorted(model.labels.items()):
                label.add_metric([model.name, name], float(version))
            if not model.up:
                failures.append(f"{model.name}: {model.error}")
                continue
            available.add_metric([model.name], float(len(model.available_versions())))
            for v in model.versions:
                ver = str(v.version)
                for s in VERSION_STATES:
                    state.add_metric([model.name, ver, s], 1.0 if v.state == s else 0.0)
                ok.add_metric([model.name, ver], 1.0 if v.error_code == "OK" else 0.0)
                if v.version in model.changed_at:
                    version_change.add_metric([model.name, ver], model.changed_at[v.version])
            if model.model_changed_at is not None:
                model_change.add_metric([model.name], model.model_changed_at)
        config_ok = GaugeMetricFamily(
            "tokenpulse_tfserving_model_config_ok",
            "Whether the last read of the model config file succeeded (1 without a file).",
            value=0.0 if snap.config_error else 1.0,
        )
        poll = GaugeMetricFamily(
            "tokenpulse_tfserving_status_poll_timestamp_seconds",
            "When the model status was last polled, unix time.",
            value=snap.polled_at,
            unit="seconds",
        )
        yield from (up, state, ok, available, label, version_change, model_change, config_ok, poll)
        age = self._clock() - snap.polled_at
        if age > self._stale_after_s:
            failures.append(f"status poll is stale ({age:.0f}s old)")
        if snap.config_error:
            failures.append(f"model config: {snap.config_error}")
        if failures:
            raise CollectorError("; ".join(failures))


@register("tfserving", default_enabled=True, help="TF Serving model version states and labels")
def build(sources: Sources) -> TfServingCollector:
    """The collector over the shared status tracker."""
    return TfServingCollector(sources.status_tracker(), sources.status_stale_after_s())
