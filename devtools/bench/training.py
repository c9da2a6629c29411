"""`tokenpulse bench training`: time per training step with and without the weight and gradient
histograms at a cadence, side by side in one run (serving.model.train's Trainer, one model).

Blocks of `--every` steps alternate between histograms off and on (off, on, on, off, ...: a drift
in the machine's speed falls on both), each block at a step offset where an "on" block writes
exactly one set of histograms, as training does once per `--every` steps. Each block draws fresh
batches as training does. It also times one histogram event on its own (the extra gradient pass
and the summaries), so the overhead at other cadences can be read off: event / (every * step).
Wall time and the process's CPU time (every thread) are both reported, as the mean and the
fastest block of each mode: on a shared machine the wall clock follows the neighbours' load
(the fastest block is the least disturbed), CPU time much less. The step is the same compiled
function in both modes, so the event's own cost is the steadiest figure.

`--workers N` measures something else: one worker against N on this machine
(`training_workers.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from serving.model.config import HISTOGRAM_EVERY

BUDGET = 0.05  # issue 20 D: histograms may slow training by at most 5 %


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The preset, the cadence and how many block pairs to time."""

    parser.add_argument("--preset", default="default", help="model preset (default)")
    parser.add_argument(
        "--every", type=int, default=HISTOGRAM_EVERY,
        help=f"steps between histograms ({HISTOGRAM_EVERY}, train.py's cadence)",
    )  # fmt: skip
    parser.add_argument("--pairs", type=int, default=3, help="off/on block pairs timed (3)")
    parser.add_argument("--events", type=int, default=5, help="histogram events timed alone (5)")
    parser.add_argument(
        "--workers", type=int, default=1,
        help="N > 1: time per step and tokens/s of 1 worker against N (MultiWorkerMirrored"
        "Strategy on loopback) and the share of collectives, instead of histograms (1)",
    )  # fmt: skip
    parser.add_argument("--steps", type=int, default=20, help="--workers: steps timed (20)")
    parser.add_argument(
        "--warmup", type=int, default=3, help="--workers: steps before timing (3; compiles)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _measure(args: argparse.Namespace, logdir: str) -> dict[str, Any]:
    import numpy as np
    import tensorflow as tf

    from serving.model import data
    from serving.model.config import get_preset
    from serving.model.train import Trainer, _lr, prepare
    from serving.model.transformer import GPT

    preset = get_preset(args.preset)
    cfg = preset.train
    every = max(1, args.every)
    model = GPT(preset.model, seed=cfg.seed)
    trainer = Trainer(model, cfg.weight_decay, every)
    _, stream = prepare(preset)  # the recipe's own vocabulary and text, as a build trains on
    train_ids, _ = data.split(stream)
    rng = np.random.default_rng(cfg.seed)

    def batch() -> tf.Tensor:
        return tf.constant(data.windows(train_ids, model.cfg.context, cfg.batch_size, rng))

    writer = tf.summary.create_file_writer(logdir)
    per_step: dict[str, list[float]] = {"off": [], "on": []}
    cpu_per_step: dict[str, list[float]] = {"off": [], "on": []}
    with writer.as_default():
        trainer.histogram_every = 0
        started = time.perf_counter()
        trainer.run_step(0, batch(), _lr(0, preset))  # compiles the step (as before histograms)
        first_step_s = time.perf_counter() - started
        started = time.perf_counter()
        grads = trainer.peek(batch())  # compiles the gradient pass: paid once per run
        peek_compile_s = time.perf_counter() - started
        started = time.perf_counter()
        trainer.write_histograms(tf.constant(0, tf.int64), grads)  # traces the summaries
        trace_s = time.perf_counter() - started
        trainer.run_step(1, batch(), _lr(1, preset))
        order = [("off", "on", "on", "off")[b % 4] for b in range(2 * args.pairs)]
        for n, mode in enumerate(order):
            trainer.histogram_every = every if mode == "on" else 0
            first = (n + 1) * every  # a multiple of `every`: one histogram event per "on" block
            started, cpu = time.perf_counter(), time.process_time()
            for i in range(first, first + every):
                trainer.run_step(i, batch(), _lr(i % cfg.steps, preset))
            per_step[mode].append((time.perf_counter() - started) / every)
            cpu_per_step[mode].append((time.process_time() - cpu) / every)
        events, cpu_events = [], []
        step = tf.constant(0, tf.int64)
        for _ in range(max(1, args.events)):
            b = batch()
            started, cpu = time.perf_counter(), time.process_time()
            trainer.write_histograms(step, trainer.peek(b))
            events.append(time.perf_counter() - started)
            cpu_events.append(time.process_time() - cpu)
    writer.flush()
    off, on = statistics.fmean(per_step["off"]), statistics.fmean(per_step["on"])
    cpu_off, cpu_on = statistics.fmean(cpu_per_step["off"]), statistics.fmean(cpu_per_step["on"])
    event, cpu_event = statistics.median(events), statistics.median(cpu_events)
    return {
        "preset": preset.name,
        "every": every,
        "pairs": args.pairs,
        "histograms_per_event": 2 * len(trainer.tags),
        "step_ms_off": off * 1e3,
        "step_ms_on": on * 1e3,
        "block_step_ms_off": [t * 1e3 for t in per_step["off"]],
        "block_step_ms_on": [t * 1e3 for t in per_step["on"]],
        "overhead": on / off - 1,
        "overhead_fastest_blocks": min(per_step["on"]) / min(per_step["off"]) - 1,
        "cpu_step_ms_off": cpu_off * 1e3,
        "cpu_step_ms_on": cpu_on * 1e3,
        "cpu_overhead": cpu_on / cpu_off - 1,
        "cpu_overhead_fastest_blocks": min(cpu_per_step["on"]) / min(cpu_per_step["off"]) - 1,
        "event_ms": event * 1e3,
        "cpu_event_ms": cpu_event * 1e3,
        "overhead_from_event": {str(n): event / (n * off) for n in (10, 25, 50, 100, 200)},
        "cpu_overhead_from_event": {
            str(n): cpu_event / (n * cpu_off) for n in (10, 25, 50, 100, 200)
        },
        "first_step_s": first_step_s,
        "gradient_pass_compile_s": peek_compile_s,
        "summaries_trace_s": trace_s,
        # a whole training run of the preset: one-off compiles plus one event per `every` steps
        "run_steps": cfg.steps,
        "run_overhead": (peek_compile_s + trace_s + event * -(-cfg.steps // every))
        / (first_step_s + cfg.steps * off),
        "budget": BUDGET,
        "cpus": os.cpu_count(),
        "load_average_1m": os.getloadavg()[0],
    }


def _report(r: dict[str, Any]) -> None:
    print(f"training step, preset {r['preset']}, histograms every {r['every']} steps "
          f"({r['histograms_per_event']} histograms an event), {r['pairs']} block pairs, "
          f"{r['cpus']} CPUs, load {r['load_average_1m']:.1f}")  # fmt: skip
    print(f"                       wall ms/step   CPU ms/step  (budget {r['budget']:.0%})")
    print(f"  without histograms  {r['step_ms_off']:12.2f}  {r['cpu_step_ms_off']:12.2f}")
    print(f"  with histograms     {r['step_ms_on']:12.2f}  {r['cpu_step_ms_on']:12.2f}")
    print(f"  overhead (means)    {r['overhead']:+12.1%}  {r['cpu_overhead']:+12.1%}")
    print(f"  overhead (fastest)  {r['overhead_fastest_blocks']:+12.1%}  "
          f"{r['cpu_overhead_fastest_blocks']:+12.1%}")  # fmt: skip
    print(f"  one histogram event {r['event_ms']:12.1f}  {r['cpu_event_ms']:12.1f}  "
          "(gradient pass + summaries); the overhead it implies at every N steps:")  # fmt: skip
    for n, share in r["overhead_from_event"].items():
        print(f"    N={n:>4}  {share:+12.1%}  {r['cpu_overhead_from_event'][n]:+12.1%}")
    print(f"  once a run: first step {r['first_step_s']:.1f} s (compiles the step), gradient "
          f"pass compile {r['gradient_pass_compile_s']:.1f} s, summaries trace "
          f"{r['summaries_trace_s']:.1f} s")  # fmt: skip
    print(f"  a whole {r['run_steps']}-step run of {r['preset']}: {r['run_overhead']:+.1%} "
          "(one-off compiles and one event per N steps, over its wall time)")  # fmt: skip


def main(args: argparse.Namespace) -> int:
    """Time the step both ways (or over 1 and N workers) and print the figures."""
    from devtools.bench import training_workers

    with tempfile.TemporaryDirectory(prefix="tp-bench-training-") as tmp:
        if args.workers > 1:
            result = training_workers.measure(args.preset, args.workers, max(1, args.steps),
                                              max(1, args.warmup), Path(tmp))  # fmt: skip
        else:
            result = _measure(args, tmp)
    if args.json:
        print(json.dumps(result, indent=2))
    elif args.workers > 1:
        training_workers.report(result)
    else:
        _report(result)
    return 0
