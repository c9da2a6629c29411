"""`tfserving` collector: version states, labels and reachability from TF Serving's status API.

The data comes from `exporter.tfserving.status.StatusTracker`, which polls in the background;
this collector only reads its latest snapshot, so a scrape never waits on the model server.
While TF Serving does not answer, the versions the tracker retains stay, in state UNKNOWN.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from exporter.registry import CollectorError, register
from exporter.sources import Sources
from exporter.tfserving.status import ModelSnapshot, StatusTracker
from tokenpulse.tfserving.status import VERSION_STATES

# key -> (name, help, labels); "seconds" families carry the unit in the name already
FAMILIES: dict[str, tuple[str, str, list[str]]] = {
    "up": (
        "tokenpulse_tfserving_up",
        "Whether TF Serving answered the model status request for this model.",
        ["model"],
    ),
    "state": (
        "tokenpulse_tfserving_model_version_state",
        "State set over TF Serving's version states: 1 for the version's current state "
        "(UNKNOWN while TF Serving does not answer).",
        ["model", "version", "state"],
    ),
    "ok": (
        "tokenpulse_tfserving_model_version_status_ok",
        "Whether the version's status error_code is OK (0 after a failed load).",
        ["model", "version"],
    ),
    "available": (
        "tokenpulse_tfserving_model_versions_available",
        "How many versions of the model are AVAILABLE.",
        ["model"],
    ),
    "label": (
        "tokenpulse_tfserving_model_label_version",
        "The version each version label points at, from the model config.",
        ["model", "label"],
    ),
    "version_change": (
        "tokenpulse_tfserving_model_version_state_change_timestamp_seconds",
        "When the exporter saw this version change state (or first saw it), unix time.",
        ["model", "version"],
    ),
    "model_change": (
        "tokenpulse_tfserving_model_state_change_timestamp_seconds",
        "When the exporter last saw any version of the model change state, unix time.",
        ["model"],
    ),
}


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
        fams = {key: GaugeMetricFamily(n, doc, labels=ls) for key, (n, doc, ls) in FAMILIES.items()}
        failures: list[str] = []
        for model in snap.models:
            fams["up"].add_metric([model.name], 1.0 if model.up else 0.0)
            for name, version in sorted(model.labels.items()):
                fams["label"].add_metric([model.name, name], float(version))
            if model.up:
                _add_versions(fams, model)
                continue
            failures.append(f"{model.name}: {model.error}")
            for version in model.retained:
                for s in VERSION_STATES:
                    value = 1.0 if s == "UNKNOWN" else 0.0
                    fams["state"].add_metric([model.name, str(version), s], value)
        config_ok = GaugeMetricFamily(
            "tokenpulse_tfserving_model_config_ok",
            "Whether the last read of the model config file succeeded (1 without a file).",
            value=0.0 if snap.config_error else 1.0,
        )
        poll = GaugeMetricFamily(
            "tokenpulse_tfserving_status_poll_timestamp_seconds",
            "When the model status was last polled, unix time.",
            value=snap.polled_at,
        )
        yield from (*fams.values(), config_ok, poll)
        age = self._clock() - snap.polled_at
        if age > self._stale_after_s:
            failures.append(f"status poll is stale ({age:.0f}s old)")
        if snap.config_error:
            failures.append(f"model config: {snap.config_error}")
        if failures:
            raise CollectorError("; ".join(failures))


def _add_versions(fams: dict[str, GaugeMetricFamily], model: ModelSnapshot) -> None:
    """The per-version series of a model that answered."""
    fams["available"].add_metric([model.name], float(len(model.available_versions())))
    for v in model.versions:
        ver = str(v.version)
        for s in VERSION_STATES:
            fams["state"].add_metric([model.name, ver, s], 1.0 if v.state == s else 0.0)
        fams["ok"].add_metric([model.name, ver], 1.0 if v.error_code == "OK" else 0.0)
        if v.version in model.changed_at:
            fams["version_change"].add_metric([model.name, ver], model.changed_at[v.version])
    if model.model_changed_at is not None:
        fams["model_change"].add_metric([model.name], model.model_changed_at)


@register("tfserving", default_enabled=True, help="TF Serving model version states and labels")
def build(sources: Sources) -> TfServingCollector:
    """The collector over the shared status tracker."""
    return TfServingCollector(sources.status_tracker(), sources.status_stale_after_s())
