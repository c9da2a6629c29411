"""Training runs' alerts (`tokenpulse model train --metrics-port`): stalled, loss, checkpoints,
a worker down, step time; warnings (chat), never the serving pager.

A worker that completed the run's last step sets `tokenpulse_training_finished` 1; every alert
skips it for cfg.training_finished_window after, so a run that ended on purpose is quiet even
when its process is gone before its targets are.
"""

from __future__ import annotations

from dataclasses import replace

from monitoring.mixin.config import MixinConfig
from monitoring.mixin.model import Alert
from monitoring.mixin.promql import Timing, number

PFX = "tokenpulse_training_"
WHO = "worker {{ $labels.instance }} of run {{ $labels.run }}"


def alerts(cfg: MixinConfig, t: Timing) -> list[Alert]:
    """Stalled, loss diverging or not finite, checkpoint stale, a worker down, step time up."""
    down = f"up{cfg.sel('training')} == 0"
    rules = [
        Alert(
            "TrainingWorkerDown",
            down,
            cfg.training_down_for,
            "warning",
            "A training worker's metrics page cannot be scraped.",
            f"Prometheus cannot scrape {WHO} (job {{{{ $labels.job }}}}): the worker is dead "
            "or hung and had not finished the run.",
        ),
        Alert(
            "TrainingStalled",
            # a target that is down is TrainingWorkerDown's: one alert per cause
            f"changes({PFX}global_step{cfg.sel('training')}[{t(cfg.training_stall_window)}])"
            f" == 0\nunless on (job, instance) ({down})",
            cfg.training_stall_for,
            "warning",
            "A training run makes no step progress.",
            f"The global step of {WHO} has not moved in {cfg.training_stall_window}.",
        ),
        Alert(
            "TrainingLossDiverging",
            _loss(cfg, t),
            cfg.training_loss_for,
            "warning",
            "The training loss is not finite or far above its recent baseline.",
            f'The loss of {WHO} is {{{{ $value | printf "%.4g" }}}} nats: not finite, or '
            f"over {number(cfg.training_loss_factor)}x its mean of the "
            f"{cfg.training_loss_baseline_window} before.",
        ),  # fmt: skip
        Alert(
            "TrainingCheckpointStale",
            _checkpoint(cfg, t),
            cfg.training_checkpoint_for,
            "warning",
            "A training run has not written a checkpoint for several of its intervals.",
            f"The last checkpoint of {WHO} is {{{{ $value | humanizeDuration }}}} old, over "
            f"{number(cfg.training_checkpoint_factor)} checkpoint intervals: a crash now loses "
            "that much training.",
        ),  # fmt: skip
        Alert(
            "TrainingStepTimeRegressed",
            _step_time(cfg, t),
            cfg.training_step_for,
            "warning",
            "Training steps take much longer than they did recently.",
            f"The median step of {WHO} takes {{{{ $value | humanizeDuration }}}} over "
            f"{cfg.training_step_window}, over {number(cfg.training_step_factor)}x its median "
            f"of the {cfg.training_step_baseline_window} before.",
        ),  # fmt: skip
    ]
    return [replace(a, expr=unless_finished(cfg, t, a.expr)) for a in rules]


def unless_finished(cfg: MixinConfig, t: Timing, expr: str) -> str:
    """`expr` but for the workers that finished the run's last step lately: a run that ended on
    purpose is quiet. Parenthesise an `or` in `expr`: `unless` binds tighter."""
    finished = f"{PFX}finished{cfg.sel('training')}[{t(cfg.training_finished_window)}]"
    return f"{expr}\nunless on (job, instance) max_over_time({finished}) == 1"


def _loss(cfg: MixinConfig, t: Timing) -> str:
    # abs() drops the metric name, so every branch has the same label set
    job, w, base = (
        cfg.sel("training"),
        t(cfg.training_loss_window),
        t(cfg.training_loss_baseline_window),
    )
    loss = f"abs({PFX}loss_nats{job})"
    now = f"avg_over_time({PFX}loss_nats{job}[{w}])"
    before = f"avg_over_time({PFX}loss_nats{job}[{base}] offset {w})"
    # parenthesised: `unless` binds tighter than `or`, and a finished worker skips every branch
    return (
        f"({loss} != {loss} or {loss} > {number(cfg.training_loss_huge)}\n"
        f"or ({now} > {number(cfg.training_loss_factor)} * {before}"
        f"\nand {now} - {before} > {number(cfg.training_loss_min_delta)}))"
    )


def _checkpoint(cfg: MixinConfig, t: Timing) -> str:
    job, w = cfg.sel("training"), t(cfg.training_step_window)
    age, steps = f"{PFX}checkpoint_age_seconds{job}", f"{PFX}checkpoint_interval_steps{job}"
    step_s = (
        f"rate({PFX}step_duration_seconds_sum{job}[{w}])"
        f" / rate({PFX}step_duration_seconds_count{job}[{w}])"
    )
    # no steps in the window (stalled: TrainingStalled's) makes the bound NaN: quiet
    return (
        f"{age} > {number(cfg.training_checkpoint_factor)} * {steps} * ({step_s})\n"
        f"and {age} > {t.secs(f'{cfg.training_checkpoint_floor_s}s')}\n"
        f"and on (job, instance) {steps} > 0"
    )


def _step_time(cfg: MixinConfig, t: Timing) -> str:
    job, w = cfg.sel("training"), t(cfg.training_step_window)
    bucket = f"{PFX}step_duration_seconds_bucket{job}"
    now = f"histogram_quantile(0.5, rate({bucket}[{w}]))"
    base = t(cfg.training_step_baseline_window)
    before = f"histogram_quantile(0.5, rate({bucket}[{base}] offset {w}))"
    return f"{now} > {number(cfg.training_step_factor)} * {before}"
