"""TF Serving and batching: request/runtime/queue latency, batch and padding sizes, versions.

TF Serving's histograms count microseconds; every latency here is divided into seconds. Its
metrics carry `model_name` and never a version; the batching ones carry no model at all. The
batching row aggregates over every replica; the replicas row shows each replica's own batching
(batches form in one replica only) and the gateway's view of its replicas.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard

from monitoring.mixin.config import MixinConfig
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

BATCH = f"{TFS}batching_session:"
# TF Serving labels warmup by the servable's path, <base path>/<version>: a legend shows the base
# path's folder and the version read from it, not a (maybe temporary) absolute path
SERVABLE_PATH = "(?:.*/)?([^/]+)/([0-9]+)/?"


def _model(cfg: MixinConfig) -> str:
    return f'{cfg.jobs.selector("modelserver")}, model_name=~"$model"'


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


def _latency_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    model_sel = _model(cfg)
    return (
        d.with_row(dashboard.Row("Requests and latency"))
        .with_panel(
            ts_panel(cfg,
                "Requests/s by status",
                "Requests TF Serving counted per second by status code name, status and "
                "metadata calls included.",
                "reqps",
                [Q(f"sum by (status) (rate({TFS}request_count{{{model_sel}}}[{RATE}]))",
                   "{{status}}")],
                width=8,
                runbooks=("TokenPulseTfServingDown", "TokenPulseTfServingRecentlyDown"),
                samples=True,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Request latency (predict)",
                "TF Serving's successful REST/gRPC predict latency, request to response.",
                "s",
                _quantiles_s(f"{TFS}request_latency", f'{model_sel}, API=~"predict|Predict"',
                             (0.5, 0.99)),
                width=8,
                samples=True,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Runtime latency",
                "Time in the model run itself (session run), warmup included.",
                "s",
                _quantiles_s(f"{TFS}runtime_latency", model_sel, (0.5, 0.99)),
                width=8,
                samples=True,
            )
        )
    )  # fmt: skip


def _batching_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    ms = cfg.jobs.selector("modelserver")
    return (
        d.with_row(dashboard.Row("Batching"))
        .with_panel(
            ts_panel(cfg,
                "Batch queueing latency",
                "Time a request waits in the batch queue before its batch runs; the dashed "
                "line is the saturation threshold.",
                "s",
                _quantiles_s(f"{BATCH}queuing_latency", ms, (0.5, 0.99)),
                bad_above(cfg.batch_queue_p99_s),
                width=8,
                runbooks=("TokenPulseTfServingBatchQueueSlow",),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Batch size",
                "Mean rows per batch before (input) and after (processed) padding over every "
                "replica; below the dashed line batching barely merges requests.",
                "short",
                [
                    Q(_mean(f"{BATCH}input_batch_size", ms), "input"),
                    Q(_mean(f"{BATCH}processed_batch_size", ms), "processed"),
                ],
                ok_above(cfg.batch_size_min),
                width=8,
                runbooks=("TokenPulseTfServingBatchingIneffective",),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Batches and rows",
                "Batches run per second and the request rows they carried over every replica: "
                "rows/s over batches/s is the batch size above. (No padding panel: the shipped "
                "batching config sets no allowed_batch_sizes, so TF Serving never pads.)",
                "ops",
                [Q(f"sum(rate({BATCH}processed_batch_size_count{{{ms}}}[{RATE}]))", "batches"),
                 Q(f"sum(rate({BATCH}input_batch_size_sum{{{ms}}}[{RATE}]))", "rows")],
                width=8,
            )
        )
    )  # fmt: skip


def _replicas_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    gw = cfg.jobs.selector("gateway")
    ms = cfg.jobs.selector("modelserver")
    return (
        d.with_row(dashboard.Row("Replicas"))
        .with_panel(
            ts_panel(cfg,
                "Batch size per replica",
                "Mean processed rows per batch in each replica: N replicas share the traffic, "
                "so each batches about 1/N of it.",
                "short",
                [Q(_mean(f"{BATCH}processed_batch_size", ms, "instance"), "{{instance}}")],
                ok_above(cfg.batch_size_min),
                width=6,
                runbooks=("TokenPulseTfServingBatchingIneffective",),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Batch queueing p99 per replica",
                "p99 time a request waits in each replica's batch queue; one saturated replica "
                "shows here before it moves the fleet's quantile.",
                "s",
                [Q(f"histogram_quantile(0.99, sum by (instance, le) (rate({BATCH}queuing_latency"
                   f"_bucket{{{ms}}}[{RATE}]))) / 1e6", "{{instance}}")],
                bad_above(cfg.batch_queue_p99_s),
                width=6,
                runbooks=("TokenPulseTfServingBatchQueueSlow",),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Gateway calls per replica",
                "Predict calls the gateway sent each replica (by `replica`, the index of its "
                "upstream URL) and how they ended; retries moved a failed connection elsewhere.",
                "reqps",
                [Q(f"sum by (replica, outcome) (rate(tokenpulse_gateway_upstream_requests_total"
                   f"{{{gw}}}[{RATE}]))", "{{replica}} {{outcome}}"),
                 Q(f"sum by (replica) (rate(tokenpulse_gateway_upstream_retries_total{{{gw}}}"
                   f"[{RATE}]))", "{{replica}} retried elsewhere")],
                width=6,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Replicas in the gateway's rotation",
                "1 while the gateway sends a replica requests (its status poll saw an AVAILABLE "
                "version and no connection failed since), with its outstanding calls.",
                "short",
                [Q(f"max by (replica) (tokenpulse_gateway_upstream_healthy{{{gw}}})",
                   "{{replica}} in rotation"),
                 Q(f"sum by (replica) (tokenpulse_gateway_upstream_in_flight_requests{{{gw}}})",
                   "{{replica}} outstanding")],
                width=6,
                runbooks=("TokenPulseTfServingDown", "TokenPulseTfServingFleetRecentlyDown"),
            )
        )
    )  # fmt: skip


def _versions_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    ex = cfg.jobs.selector("exporter")
    ms = cfg.jobs.selector("modelserver")
    return (
        d.with_row(dashboard.Row("Model versions"))
        .with_panel(
            stat_panel(cfg,
                "Available versions",
                "Versions of the model in state AVAILABLE (from the exporter's status polls); "
                "0 means the model cannot answer.",
                "none",
                [Q(f'sum by (model) (tokenpulse_tfserving_model_versions_available{{{ex}, '
                   f'model=~"$model"}})', "{{model}}")],
                ok_above(1),
                width=6,
                runbooks=("TokenPulseTfServingNoAvailableVersion",),
            ).height(8)
        )
        .with_panel(
            ts_panel(cfg,
                "Version states",
                "Each version's current state (START, LOADING, AVAILABLE, UNLOADING, END).",
                "none",
                [Q(f'max by (version, state) (tokenpulse_tfserving_model_version_state{{{ex}, '
                   f'model=~"$model", version=~"$version"}}) == 1', "v{{version}} {{state}}")],
                width=6,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Load events",
                "SavedModel load attempts in the interval, by status; a non-OK status is a "
                "failed load.",
                "short",
                [Q(f"sum by (status) (increase(:tensorflow:cc:saved_model:load_attempt_count"
                   f"{{{ms}}}[{RATE}]))", "{{status}}"),
                 Q(f"sum by (status) (:tensorflow:cc:saved_model:load_attempt_count{{{ms}}})",
                   "total {{status}}")],
                width=6,
                runbooks=("TokenPulseTfServingVersionLoadFailed",),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Warmup",
                "Mean time to replay the warmup records of each loaded version (TF Serving "
                "labels it by path only: base folder and version are read from the path).",
                "s",
                [Q(_from_path(f"sum by (model_path) ({TFS}model_warmup_latency_sum{{{ms}}}) "
                              f"/ sum by (model_path) ({TFS}model_warmup_latency_count{{{ms}}}) "
                              "/ 1e6"), "{{base}} v{{version}}")],
                width=6,
            )
        )
    )  # fmt: skip


def build(cfg: MixinConfig) -> dashboard.Dashboard:
    """The TF Serving and batching dashboard."""
    ex = cfg.jobs.selector("exporter")
    ms = cfg.jobs.selector("modelserver")
    d = (
        new_dashboard(
            cfg.dashboard_uids["serving"],
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
                f"label_values({TFS}request_count{{{ms}}}, model_name)",
                DEFAULT_MODEL_NAME,
            )  # fmt: skip
        )
        .with_variable(
            query_variable(
                "version",
                "Version",
                f'label_values(tokenpulse_tfserving_model_version_state{{{ex}, model=~"$model"}}, '
                "version)",
            )
        )
    )
    return _versions_row(cfg, _replicas_row(cfg, _batching_row(cfg, _latency_row(cfg, d))))
