"""`tokenpulse bench malloc`: TensorFlow's work on glibc's malloc vs tcmalloc, side by side.

Each run is a fresh process doing what the project's TensorFlow processes do: import
TensorFlow, build the `tiny` model, take `--steps` compiled training steps (stack.allocator's
reason: buffers freed and allocated again at every op) and generate `--new-tokens` tokens for 8
rows `--generations` times. The two arms alternate run by run, so a busy moment of the machine
falls on both: one with LD_PRELOAD unset, one with stack.allocator's environment (tcmalloc
preloaded). The parent reads each child's user and system CPU seconds from the kernel as it
reaps it; each child checks its own memory map for the allocator it was meant to get. Prints
the medians, the tcmalloc/glibc ratios, and how much of the CPU was system time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from devtools.bench.harness import positive, progress
from stack import allocator

ARMS = ("glibc", "tcmalloc")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Bench options."""
    parser.add_argument("--runs", type=positive, default=3, help="runs per arm (median)")
    parser.add_argument("--steps", type=positive, default=40, help="training steps per run")
    parser.add_argument("--generations", type=positive, default=4, help="generate calls per run")
    parser.add_argument("--new-tokens", type=positive, default=32, help="tokens per generation")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def workload(steps: int, generations: int, new_tokens: int) -> dict[str, Any]:
    """The child's work; returns its phases' seconds and the allocator it ran on."""
    started = time.perf_counter()
    import numpy as np
    import tensorflow as tf

    from devtools.bench.model import ours
    from serving.model.config import get_preset
    from serving.model.train import Trainer
    from serving.model.transformer import GPT

    preset = get_preset("tiny")
    cfg = preset.model
    imported = time.perf_counter()
    trainer = Trainer(GPT(cfg, seed=0), preset.train.weight_decay, histogram_every=0)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        batch = rng.integers(0, cfg.vocab_size, size=(preset.train.batch_size, cfg.context + 1))
        trainer.update(tf.constant(batch, tf.int32), tf.constant(1e-3))
    trained = time.perf_counter()
    runner = ours(cfg, count_ops=False)
    for _ in range(generations):
        runner.generate(8, 16, new_tokens)
    done = time.perf_counter()
    return {
        "tcmalloc_loaded": allocator.loaded(),
        "import_s": imported - started,
        "train_s": trained - imported,
        "generate_s": done - trained,
    }


def _child(arm: str, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("LD_PRELOAD", None)
    if arm == "tcmalloc":
        env = allocator.preloading(env, allocator.tcmalloc_path())
    code = (
        "import json, sys; from devtools.bench.malloc import workload; "
        f"print(json.dumps(workload({args.steps}, {args.generations}, {args.new_tokens})))"
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=1200
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"the {arm} run failed:\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if figures.pop("tcmalloc_loaded") != (arm == "tcmalloc"):
        raise RuntimeError(f"the {arm} run did not get the allocator it was meant to")
    figures.update(
        user_s=after.ru_utime - before.ru_utime,
        sys_s=after.ru_stime - before.ru_stime,
        wall_s=wall,
    )
    figures["cpu_s"] = figures["user_s"] + figures["sys_s"]
    return figures


def measure(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Each arm's runs, alternating which goes first."""
    say = progress("malloc")
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    for i in range(args.runs):
        for arm in ARMS if i % 2 == 0 else ARMS[::-1]:
            runs[arm].append(_child(arm, args))
            say(f"run {i + 1}/{args.runs}: {arm} {runs[arm][-1]['cpu_s']:.1f} CPU-s")
    return runs


FIGURES = ("cpu_s", "user_s", "sys_s", "wall_s", "train_s", "generate_s")


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians per arm, tcmalloc/glibc ratios and each arm's share of system time."""
    medians = {
        arm: {f: statistics.median(r[f] for r in rows) for f in FIGURES}
        for arm, rows in runs.items()
    }
    for figures in medians.values():
        figures["sys_share"] = figures["sys_s"] / figures["cpu_s"]
    ratios = {f: medians["tcmalloc"][f] / medians["glibc"][f] for f in FIGURES if f != "sys_s"}
    return {"medians": medians, "ratio_tcmalloc_over_glibc": ratios, "runs": runs}


def report(summary: dict[str, Any]) -> str:
    """The figures as a table."""
    med, ratio = summary["medians"], summary["ratio_tcmalloc_over_glibc"]
    lines = [f"{'median':<12} {'glibc':>9} {'tcmalloc':>9} {'ratio':>6}"]
    for f in FIGURES:
        r = f"{ratio[f]:>6.2f}" if f in ratio else ""
        lines.append(f"{f:<12} {med['glibc'][f]:>9.2f} {med['tcmalloc'][f]:>9.2f} {r}")
    lines.append(
        f"system time: {100 * med['glibc']['sys_share']:.0f} % of the CPU on glibc, "
        f"{100 * med['tcmalloc']['sys_share']:.0f} % on tcmalloc"
    )
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    if allocator.tcmalloc_path() is None:
        print(
            f"bench malloc: error: {allocator.LIBRARY} is not installed "
            "(Debian: apt-get install libtcmalloc-minimal4)",
            file=sys.stderr,
        )
        return 2
    summary = summarise(measure(args))
    print(json.dumps(summary, indent=2) if args.json else report(summary))
    return 0
