"""`canary` collector: the latest golden-prompt results per model version.

Results come from `exporter.tfserving.canary.CanaryRunner`, which runs on its own schedule; a
scrape only reads them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from exporter.registry import CollectorError, register
from exporter.sources import Sources
from exporter.tfserving.canary import CanaryRunner

_LABELS = ["model", "version"]
# (key, metric name after tokenpulse_canary_, help)
_GAUGES = [
    ("success", "success", "Whether every golden prompt got an answer (1) or not (0)."),
    ("match", "match", "Whether every answer equals its golden output exactly."),
    ("match_ratio", "match_ratio", "Fraction of prompts whose answer equals the golden output."),
    ("similarity", "similarity_ratio", "Mean difflib similarity of answers to golden outputs."),
    ("latency", "latency_seconds", "Mean latency of one golden prompt in the last run."),
    ("nll", "mean_nll_nats", "Mean of the answers' mean negative log-likelihood per token."),
    ("golden_nll", "golden_mean_nll_nats", "Mean NLL the version had at export, same prompts."),
    ("delta", "mismatch_nll_delta_nats", "Mean answer NLL minus golden NLL where they differ."),
    ("prompts", "prompts", "Golden prompts in the version's canary file."),
    ("last", "last_run_timestamp_seconds", "When the last canary run finished, unix time."),
]


class CanaryCollector:
    """Success, latency, match, similarity and mean NLL of the last canary run per version."""

    def __init__(
        self, runner: CanaryRunner, stale_after_s: float, clock: Callable[[], float] = time.time
    ) -> None:
        self._runner = runner
        self._stale_after_s = stale_after_s
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        """Families from the runner's latest results; CollectorError if the runner is stuck."""
        fams = {key: _gauge(name, doc) for key, name, doc in _GAUGES}
        runs = CounterMetricFamily(
            "tokenpulse_canary_runs",
            "Canary runs per result: ok, mismatch (answered, not golden) or error.",
            labels=[*_LABELS, "result"],
        )
        for r in sorted(self._runner.results(), key=lambda r: (r.model, r.version)):
            key = [r.model, str(r.version)]
            fams["success"].add_metric(key, 0.0 if r.result == "error" else 1.0)
            fams["prompts"].add_metric(key, float(r.prompts))
            fams["last"].add_metric(key, r.finished_at)
            if r.result == "error":
                continue
            fams["match"].add_metric(key, 1.0 if r.result == "ok" else 0.0)
            fams["match_ratio"].add_metric(key, r.matched / r.prompts)
            for name, value in (
                ("similarity", r.similarity),
                ("latency", r.latency_s),
                ("nll", r.mean_nll),
                ("golden_nll", r.golden_mean_nll),
                ("delta", r.mismatch_nll_delta),
            ):
                if value is not None:
                    fams[name].add_metric(key, value)
        for (model, version, result), count in sorted(self._runner.runs().items()):
            runs.add_metric([model, str(version), result], float(count))
        yield from fams.values()
        yield runs
        if not self._runner.alive():
            raise CollectorError("canary thread died")
        last = self._runner.last_cycle()
        if last is not None and self._clock() - last > self._stale_after_s:
            raise CollectorError(f"canary results are stale ({self._clock() - last:.0f}s old)")


def _gauge(name: str, doc: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"tokenpulse_canary_{name}", doc, labels=_LABELS)


@register("canary", default_enabled=True, help="golden-prompt canaries against AVAILABLE versions")
def build(sources: Sources) -> CanaryCollector:
    """The collector over the shared canary runner."""
    return CanaryCollector(sources.canary_runner(), sources.canary_stale_after_s())
