"""TF Serving's alerts: batching, replicas down or in a crash loop, refused requests, versions.

The holds after a delivered TfServingDown (or TfServingFlapping) or TfServingNoAvailableVersion
page are TF Serving's too (monitoring/mixin/alerts/holds.py).
"""

from __future__ import annotations

from dataclasses import replace

from monitoring.mixin.alerts.common import down, exhausted, in_flight_per_replica
from monitoring.mixin.alerts.holds import down_holds, unavailable_holds
from monitoring.mixin.config import MixinConfig
from monitoring.mixin.model import Alert
from monitoring.mixin.promql import Timing, number


def _replica(cfg: MixinConfig) -> str:
    """Names the replica where the series has the label (nothing where it has not: one replica)."""
    return (
        f"{{{{ with $labels.{cfg.replica_label} }}}} Replica {{{{ . }}}} is out of the gateway's "
        "rotation; the other replicas serve.{{ end }}"
    )


def batching_alerts(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """TF Serving's batcher: batches of about one while calls are in flight to batch (fleet);
    a slow batch queue (per replica: one saturated replica would hide in the fleet's quantile)."""
    return [
        Alert(
            "TfServingBatchingIneffective",
            f"job:tfserving_batch_size:mean10m < {number(cfg.batch_size_min)}\n"
            f"and on () {in_flight_per_replica(cfg, t(cfg.batch_window))}"
            f" >= {number(cfg.batch_in_flight_min)}",
            cfg.batch_for,
            "warning",
            "TF Serving runs batches of about one request while several are in flight.",
            "Mean processed batch size is {{ $value | humanize }} over "
            f"{cfg.batch_window} while the gateway keeps at least {cfg.batch_in_flight_min} "
            "predict calls in flight per replica: batching is not combining them.",
        ),
        Alert(
            "TfServingBatchQueueSlow",
            "instance:tfserving_batch_queuing_latency_seconds:p99_5m"
            f" > {number(cfg.batch_queue_p99_s)}",
            cfg.batch_queue_for,
            "warning",
            "Requests wait long in TF Serving's batch queue.",
            "p99 batch queueing latency of TF Serving at {{ $labels.instance }} is "
            "{{ $value | humanizeDuration }} (threshold "
            f"{number(cfg.batch_queue_p99_s)} s).",
            per_replica=True,
        ),
    ]


def flapping_alert(cfg: MixinConfig, t: Timing) -> Alert:
    """A crash loop: down again within FLAP_WINDOW of an earlier outage; one page through it."""
    up = f"up{cfg.sel('modelserver')}"
    return Alert(
        "TfServingFlapping",
        # `up` went down, came back and went down again within the window (3 changes), and it
        # was down within FLAP_RECENT: true around every outage of the loop, and keep_firing_for
        # carries it over the up-times between them
        f"changes({up}[{t(cfg.flap_window)}]) >= {cfg.flap_changes}\n"
        f"and min_over_time({up}[{t(cfg.flap_recent)}]) == 0",
        cfg.flap_for,
        "critical",
        "TF Serving keeps going down and coming back: a crash loop.",
        "TF Serving at {{ $labels.instance }} changed between up and down "
        f"{{{{ $value }}}} times in {cfg.flap_window}: every down spell fails requests, even those "
        "too short to page as TokenPulseTfServingDown (which the loop's page stands for).",
        per_replica=True,
        keep_firing_for=cfg.flap_keep_firing,
    )


def target_alerts(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """Targets down and flapping, and the holds after their pages; refused requests; model
    versions (and the holds after their pages)."""
    tfs_down = f"up{cfg.sel('modelserver')} == 0"
    ex = cfg.sel("exporter")
    # node: kept where present (Kubernetes), so a GPU alert can explain it (GpuMemoryNearlyFull)
    replica_by = f"job, instance, {cfg.replica_label}, {cfg.node_label}"
    refused = exhausted(cfg, t)
    flapping = f'ALERTS{{alertname="{cfg.alert_prefix}TfServingFlapping",alertstate="firing"}}'
    return [
        replace(
            down(
                cfg,
                "modelserver",
                "TfServing",
                "critical",
                "The model server (TF Serving)",
                _replica(cfg),
            ),
            # a crash loop is one page (TfServingFlapping, firing through the loop): its outages
            # are not paged one by one
            expr=f"{tfs_down}\nunless on ({replica_by}) {flapping}",
        ),
        flapping_alert(cfg, t),
        Alert(
            "TfServingResourceExhausted",
            f"sum by ({replica_by}, model_name) ({refused})"
            f" > {number(cfg.resource_exhausted_rate)}",
            cfg.resource_exhausted_for,
            "warning",
            "TF Serving refuses requests with RESOURCE_EXHAUSTED.",
            'TF Serving at {{ $labels.instance }} answers {{ $value | printf "%.2g" }} '
            "requests/s for model {{ $labels.model_name }} with RESOURCE_EXHAUSTED (out of memory "
            f"or a full batch queue) over {cfg.resource_exhausted_window}.",
            per_replica=True,
        ),
        Alert(
            "TfServingNoAvailableVersion",
            # a down server is its own page: do not page twice for it
            f"(tokenpulse_tfserving_model_versions_available{ex} == 0"
            f" or tokenpulse_tfserving_up{ex} == 0)\nunless on ({cfg.replica_label}) ({tfs_down})",
            cfg.no_version_for,
            "critical",
            "A model has no AVAILABLE version: every request for it fails.",
            "TF Serving reports no AVAILABLE version of model {{ $labels.model }}.",
            per_replica=True,
        ),
        # the holds come after every alert they read (Down, Flapping, NoAvailableVersion): a group
        # runs its rules in order, so their marks see this evaluation's alert state, not the one
        # before (holds.py)
        *down_holds(cfg, t),
        *unavailable_holds(cfg, t),
        Alert(
            "TfServingVersionLoadFailed",
            f"tokenpulse_tfserving_model_version_status_ok{ex} == 0",
            cfg.load_failure_for,
            "warning",
            "A model version failed to load.",
            "Model {{ $labels.model }} version {{ $labels.version }} has an error status in "
            "TF Serving: it did not load and serves nothing.",
            per_replica=True,
        ),
    ]


def alerts(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """Every TF Serving alert, in rule-file order."""
    return [*batching_alerts(cfg, t), *target_alerts(cfg, t)]
