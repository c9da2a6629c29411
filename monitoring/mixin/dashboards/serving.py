"""TF Serving and batching: request/runtime/queue latency, batch and padding sizes, versions.

TF Serving's histograms count microseconds; every latency here is divided into seconds. Its
metrics carry `model_name` and never a version; the batching ones carry no model at all. The
batching row aggregates over every replica; the replicas row shows each replica's own batching
(batches form in one replica only) and the gateway's view of its replicas.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard

from monitoring.mixin import config as cfg
from monitoring.mixin.dashboards.panels import (
    RATE,
    Q,
    bad_above,
    new_dashboard,
    ok_above,
    query_variable,
    stat_panel,
    ts_panel,
)
from monitoring.mixin.model import TFSERVING_PREFIX as TFS
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

MS = cfg.JOBS.selector("modelserver")
EX = cfg.JOBS.selector("exporter")
BATCH = f"{TFS}batching_session:"
GW = cfg.JOBS.selector("gateway")
MODEL = f'{MS}, model_name=~"$model"'
# TF Serving labels warmup by the servable's path, <base path>/<version>: a legend shows the base
# path's folder and the version read from it, not a (maybe temporary) absolute path
SERVABLE_PATH = "(?:.*/)?([^/]+)/([0-9]+)/?"


def _from_path(expr: str) -> str:
    """`expr` with `base` and `version` labels read from its `model_path` label."""
    with_base = f'label_replace({expr}, "base", "$1", "model_path", "{SERVABLE_PATH}")'
    return f'label_replace({with_base}, "version", "$2", "model_path", "{SERVABLE_PATH}")'


def _quantiles_s(metric: str, selector: str, quantiles: tuple[float, ...]) -> list[Q]:
    return [
        Q(
            f"histogram_quantile({p}, sum by (le) (rate({metric}_bucket{{{selector}}}[{RATE}])))"
            " / 1e6",
            f"p{round(p * 100)}",
        )
        for p in quantiles
    ]


def _mean(metric: str, selector: str, by: str = "") -> str:
    group = f" by ({by})" if by else ""
    return (
        f"sum{group} (rate({metric}_sum{{{selector}}}[{RATE}])) "
        f"/ sum{group} (rate({metric}_count{{{selector}}}[{RATE}]))"
    )


def _latency_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        d.with_row(dashboard.Row("Requests and latency"))
        .with_panel(
            ts_panel(
                "Requests/s by status",
                "Requests TF Serving counted per second by status code name, status and "
                "metadata calls included.",
                "reqps",
                [Q(f"sum by (status) (rate({TFS}request_count{{{MODEL}}}[{RATE}]))",
                   "{{status}}")],
                width=8,
                runbooks=("TokenPulseTfServingDown", "TokenPulseTfServingRecentlyDown"),
                samples=True,
            )
        )
        .with_panel(
            ts_panel(
                "Request latency (predict)",
                "TF Serving's successful REST/gRPC predict latency, request to response.",
                "s",
                _quantiles_s(f"{TFS}request_latency", f'{MODEL}, API=~"predict|Predict"',
                             (0.5, 0.99)),
                width=8,
                samples=True,
            )
        )
        .with_panel(
            ts_panel(
                "Runtime latency",
                "Time in the model run itself (session run), warmup included.",
                "s",
                _quantiles_s(f"{TFS}runtime_latency", MODEL, (0.5, 0.99)),
                width=8,
                samples=True,
            )
        )
    )  # fmt: skip


def _batching_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        d.with_row(dashboard.Row("Batching"))
        .with_panel(
            ts_panel(
                "Batch queueing latency",
                "Time a request waits in the batch queue before its batch runs; the dashed "
                "line is the saturation threshold.",
                "s",
                _quantiles_s(f"{BATCH}queuing_latency", MS, (0.5, 0.99)),
                bad_above(cfg.BATCH_QUEUE_P99_S),
                width=8,
                runbooks=("TokenPulseTfServingBatchQueueSlow",),
            )
        )
        .with_panel(
            ts_panel(
                "Batch size",
                "Mean rows per batch before (input) and after (processed) padding over every "
                "replica; below the dashed line batching barely merges requests.",
                "short",
                [
                    Q(_mean(f"{BATCH}input_batch_size", MS), "input"),
                    Q(_mean(f"{BATCH}processed_batch_size", MS), "processed"),
                ],
                ok_above(cfg.BATCH_SIZE_MIN),
                width=8,
                runbooks=("TokenPulseTfServingBatchingIneffective",),
            )
        )
        .with_panel(
            ts_panel(
                "Batches and rows",
                "Batches run per second and the request rows they carried over every replica: "
                "rows/s over batches/s is the batch size above. (No padding panel: the shipped "
                "batching config sets no allowed_batch_sizes, so TF Serving never pads.)",
                "ops",
                [Q(f"sum(rate({BATCH}processed_batch_size_count{{{MS}}}[{RATE}]))", "batches"),
                 Q(f"sum(rate({BATCH}input_batch_size_sum{{{MS}}}[{RATE}]))", "rows")],
                width=8,
            )
        )
    )  # fmt: skip


def _replicas_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        d.with_row(dashboard.Row("Replicas"))
        .with_panel(
            ts_panel(
                "Batch size per replica",
                "Mean processed rows per batch in each replica: N replicas share the traffic, "
                "so each batches about 1/N of it.",
                "short",
                [Q(_mean(f"{BATCH}processed_batch_size", MS, "instance"), "{{instance}}")],
                ok_above(cfg.BATCH_SIZE_MIN),
                width=6,
                runbooks=("TokenPulseTfServingBatchingIneffective",),
            )
        )
        .with_panel(
            ts_panel(
                "Batch queueing p99 per replica",
                "p99 time a request waits in each replica's batch queue; one saturated replica "
                "shows here before it moves the fleet's quantile.",
                "s",
                [Q(f"histogram_quantile(0.99, sum by (instance, le) (rate({BATCH}queuing_latency"
                   f"_bucket{{{MS}}}[{RATE}]))) / 1e6", "{{instance}}")],
                bad_above(cfg.BATCH_QUEUE_P99_S),
                width=6,
                runbooks=("TokenPulseTfServingBatchQueueSlow",),
            )
        )
        .with_panel(
            ts_panel(
                "Gateway calls per replica",
                "Predict calls the gateway sent each replica (by `replica`, the index of its "
                "upstream URL) and how they ended; retries moved a failed connection elsewhere.",
                "reqps",
                [Q(f"sum by (replica, outcome) (rate(tokenpulse_gateway_upstream_requests_total"
                   f"{{{GW}}}[{RATE}]))", "{{replica}} {{outcome}}"),
                 Q(f"sum by (replica) (rate(tokenpulse_gateway_upstream_retries_total{{{GW}}}"
                   f"[{RATE}]))", "{{replica}} retried elsewhere")],
                width=6,
            )
        )
        .with_panel(
            ts_panel(
                "Replicas in the gateway's rotation",
                "1 while the gateway sends a replica requests (its status poll saw an AVAILABLE "
                "version and no connection failed since), with its outstanding calls.",
                "short",
                [Q(f"max by (replica) (tokenpulse_gateway_upstream_healthy{{{GW}}})",
                   "{{replica}} in rotation"),
                 Q(f"sum by (replica) (tokenpulse_gateway_upstream_in_flight_requests{{{GW}}})",
                   "{{replica}} outstanding")],
                width=6,
                runbooks=("TokenPulseTfServingDown", "TokenPulseTfServingFleetRecentlyDown"),
            )
        )
    )  # fmt: skip


def _versions_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        d.with_row(dashboard.Row("Model versions"))
        .with_panel(
            stat_panel(
                "Available versions",
                "Versions of the model in state AVAILABLE (from the exporter's status polls); "
                "0 means the model cannot answer.",
                "none",
                [Q(f'sum by (model) (tokenpulse_tfserving_model_versions_available{{{EX}, '
                   f'model=~"$model"}})', "{{model}}")],
                ok_above(1),
                width=6,
                runbooks=("TokenPulseTfServingNoAvailableVersion",),
            ).height(8)
        )
        .with_panel(
            ts_panel(
                "Version states",
                "Each version's current state (START, LOADING, AVAILABLE, UNLOADING, END).",
                "none",
                [Q(f'max by (version, state) (tokenpulse_tfserving_model_version_state{{{EX}, '
                   f'model=~"$model", version=~"$version"}}) == 1', "v{{version}} {{state}}")],
                width=6,
            )
        )
        .with_panel(
            ts_panel(
                "Load events",
                "SavedModel load attempts in the interval, by status; a non-OK status is a "
                "failed load.",
                "short",
                [Q(f"sum by (status) (increase(:tensorflow:cc:saved_model:load_attempt_count"
                   f"{{{MS}}}[{RATE}]))", "{{status}}"),
                 Q(f"sum by (status) (:tensorflow:cc:saved_model:load_attempt_count{{{MS}}})",
                   "total {{status}}")],
                width=6,
                runbooks=("TokenPulseTfServingVersionLoadFailed",),
            )
        )
        .with_panel(
            ts_panel(
                "Warmup",
                "Mean time to replay the warmup records of each loaded version (TF Serving "
                "labels it by path only: base folder and version are read from the path).",
                "s",
                [Q(_from_path(f"sum by (model_path) ({TFS}model_warmup_latency_sum{{{MS}}}) "
                              f"/ sum by (model_path) ({TFS}model_warmup_latency_count{{{MS}}}) "
                              "/ 1e6"), "{{base}} v{{version}}")],
                width=6,
            )
        )
    )  # fmt: skip


def build() -> dashboard.Dashboard:
    """The TF Serving and batching dashboard."""
    d = (
        new_dashboard(
            cfg.DASHBOARD_UIDS["serving"],
            "TokenPulse / TF Serving and batching",
            "TF Serving's own metrics (scraped from the model server) and the exporter's view "
            "of model versions: latency, batching effectiveness, loads and warmup. TF Serving "
            "labels no version: `$version` picks the version states and the samples behind the "
            "error and latency panels (their Kibana links).",
            ["tokenpulse", "tfserving"],
        )
        .with_variable(
            query_variable(
                "model",
                "Model",
                f"label_values({TFS}request_count{{{MS}}}, model_name)",
                DEFAULT_MODEL_NAME,
            )  # fmt: skip
        )
        .with_variable(
            query_variable(
                "version",
                "Version",
                f'label_values(tokenpulse_tfserving_model_version_state{{{EX}, model=~"$model"}}, '
                "version)",
            )
        )
    )
    return _versions_row(_replicas_row(_batching_row(_latency_row(d))))
