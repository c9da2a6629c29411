"""Training runs (`tokenpulse model train --metrics-port`): progress and speed per worker, loss and
gradient norm, step-time quantiles, checkpoint age and the workers' targets; TensorBoard linked."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard
from grafana_foundation_sdk.models.dashboard import DashboardLinkType

from monitoring.mixin.config import MixinConfig
from monitoring.mixin.dashboards.panels import (
    RATE,
    Q,
    bad_above,
    new_dashboard,
    ok_above,
    query_variable,
    ts_panel,
)

PFX = "tokenpulse_training_"
QUANTILES = (0.5, 0.9, 0.99)


def _sel(cfg: MixinConfig) -> str:
    return f'{cfg.jobs.selector("training")}, run=~"$run"'


def _progress_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    s, alert = _sel(cfg), cfg.alertname
    return (
        d.with_row(dashboard.Row("Progress"))
        .with_panel(
            ts_panel(cfg,
                "Global step",
                "The run's global step as each worker reports it; a flat line is a stalled run "
                "(a worker that finished the run's last step sets finished and is not alerted).",
                "none",
                [Q(f"{PFX}global_step{{{s}}}", "{{instance}}")],
                width=8,
                runbooks=(alert("TrainingStalled"),),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Steps/s per worker",
                "Training steps completed per second by each worker.",
                "ops",
                [Q(f"rate({PFX}step_duration_seconds_count{{{s}}}[{RATE}])", "{{instance}}")],
                width=8,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Tokens/s per worker",
                "Training tokens per second per worker (each counts the global batch).",
                "short",
                [Q(f"rate({PFX}tokens_total{{{s}}}[{RATE}])", "{{instance}}")],
                width=8,
            )
        )
    )  # fmt: skip


def _model_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    s, alert = _sel(cfg), cfg.alertname
    bucket = f"{PFX}step_duration_seconds_bucket{{{s}}}"
    return (
        d.with_row(dashboard.Row("Loss, gradients and steps"))
        .with_panel(
            ts_panel(cfg,
                "Loss",
                "Training loss of the last step, nats per token, per worker; the full curve "
                "and the held-out bits per byte are in TensorBoard (dashboard link).",
                "none",
                [Q(f"{PFX}loss_nats{{{s}}}", "{{instance}}")],
                width=8,
                runbooks=(alert("TrainingLossDiverging"),),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Gradient norm",
                "Global gradient norm before clipping, per worker: spikes come before a loss "
                "that diverges.",
                "none",
                [Q(f"{PFX}gradient_norm{{{s}}}", "{{instance}}")],
                width=8,
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Step time quantiles",
                "Wall time of one step over the selected workers.",
                "s",
                [Q(f"histogram_quantile({p}, sum by (le) (rate({bucket}[{RATE}])))",
                   f"p{round(p * 100)}") for p in QUANTILES],
                width=8,
                runbooks=(alert("TrainingStepTimeRegressed"),),
            )
        )
    )  # fmt: skip


def _health_row(cfg: MixinConfig, d: dashboard.Dashboard) -> dashboard.Dashboard:
    s, alert = _sel(cfg), cfg.alertname
    return (
        d.with_row(dashboard.Row("Checkpoints and workers"))
        .with_panel(
            ts_panel(cfg,
                "Checkpoint age",
                "Seconds since each worker's last checkpoint (since its start until the first); "
                "a crash now loses this much training.",
                "s",
                [Q(f"{PFX}checkpoint_age_seconds{{{s}}}", "{{instance}}")],
                bad_above(float(cfg.training_checkpoint_floor_s)),
                runbooks=(alert("TrainingCheckpointStale"),),
            )
        )
        .with_panel(
            ts_panel(cfg,
                "Training workers up",
                "1 when Prometheus' last scrape of the worker's metrics page succeeded, and "
                "whether it finished the run's last step.",
                "none",
                [Q(f"up{{{s}}}", "up {{instance}}"),
                 Q(f"{PFX}finished{{{s}}}", "finished {{instance}}")],
                ok_above(1),
                max_value=1,
                runbooks=(alert("TrainingWorkerDown"),),
            )
        )
    )  # fmt: skip


def build(cfg: MixinConfig) -> dashboard.Dashboard:
    """The training dashboard."""
    job = cfg.jobs.selector("training")
    d = new_dashboard(
        cfg.dashboard_uids["training"],
        "TokenPulse / Training",
        "Training runs that serve metrics (`tokenpulse model train --metrics-port`): speed "
        "per worker, loss and gradient norm, step time, checkpoints. TensorBoard holds the "
        "full curves.",
        ["tokenpulse", "training"],
    ).with_variable(query_variable("run", "Run", f"label_values({PFX}worker_info{{{job}}}, run)"))
    if cfg.links.tensorboard_url:  # a deployment's links may name none
        d = d.link(
            dashboard.DashboardLink("TensorBoard")
            .type(DashboardLinkType.LINK)
            .url(cfg.links.tensorboard_url)
            .target_blank(True)
        )
    return _health_row(cfg, _model_row(cfg, _progress_row(cfg, d)))
