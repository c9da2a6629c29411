"""`tokenpulse bench training --workers N`: time per step and tokens/s of one worker against N
MultiWorkerMirroredStrategy workers on this machine, side by side in one run, and the share of
the N workers' step spent in collectives.

Each configuration runs in fresh processes on loopback, as `model train` starts them: first one
worker (the single-process trainer, what `--workers 1` runs), then N workers with a TF_CONFIG
each, on the same global batch (each worker computes 1/N of it), the same seeded batches and
the same number of steps after the same warm-up (which compiles the step). A step is timed on
the chief from the call until its loss is on the host, so the wall time includes waiting for
the slowest worker.

The collectives are measured by timing the all-reduce alone: after the steps, each worker runs
the step's own all-reduce (SUM over the loss and a tensor of every gradient's shape, in the
replica context of the same strategy) the same number of times; its mean time over the step's
mean time is the share. An all-reduce alone does not overlap computation, and neither does the
step's (it follows the gradient pass), so the share is an estimate of the step's time inside
collectives, not a trace of it.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from serving.model.worker import tf_config
from tokenpulse.procs import free_port, stop_process

CHILD = (sys.executable, "-m", "devtools.bench.training_workers")  # + the job as JSON
TIMEOUT_S = 900.0


def _child(job: dict[str, Any]) -> dict[str, Any]:
    """One worker's timings (TF_CONFIG set when it is one of several)."""
    import numpy as np
    import tensorflow as tf

    from serving.model import data, replicas
    from serving.model.config import get_preset
    from serving.model.train import Trainer, _lr
    from serving.model.transformer import GPT

    preset = get_preset(job["preset"])
    cfg, count = preset.train, job["workers"]
    strategy = replicas.make_strategy(count, False, 0)
    with strategy.scope() if strategy else contextlib.nullcontext():
        model = GPT(preset.model, seed=cfg.seed)
    trainer: Any
    if strategy is None:
        trainer = Trainer(model, cfg.weight_decay, 0)
    else:
        trainer = replicas.ReplicatedTrainer(strategy, model, cfg.weight_decay)
    train_ids, _ = data.split(data.token_stream(data.documents(cfg.corpus_bytes)))
    rng = np.random.default_rng(cfg.seed)

    def step(i: int) -> float:
        batch = data.windows(train_ids, preset.model.context, cfg.batch_size, rng)
        started = time.perf_counter()
        if strategy is None:
            trainer.run_step(i, tf.constant(batch), _lr(i, preset))
        else:
            trainer.run_step(i, batch, _lr(i, preset))  # returns the loss: on the host
        return time.perf_counter() - started

    for i in range(job["warmup"]):
        step(i)
    steps = [step(job["warmup"] + i) for i in range(job["steps"])]
    result: dict[str, Any] = {"step_s": steps, "replicas": getattr(trainer, "replicas", 1)}
    if strategy is not None:
        shapes = [v.shape for v in trainer.optimizer.variables]

        def reduce_only() -> list[tf.Tensor]:
            tensors = [tf.zeros([]), *(tf.zeros(s) for s in shapes)]
            ctx = tf.distribute.get_replica_context()
            return ctx.all_reduce(tf.distribute.ReduceOp.SUM, tensors)

        @tf.function
        def all_reduce() -> tf.Tensor:
            out = strategy.run(reduce_only)
            return strategy.experimental_local_results(out[0])[0]

        float(all_reduce())  # traces it and sets the collective up
        reduces = []
        for _ in range(job["steps"]):
            started = time.perf_counter()
            float(all_reduce())
            reduces.append(time.perf_counter() - started)
        result["all_reduce_s"] = reduces
        result["gradient_bytes"] = int(sum(4 * s.num_elements() for s in shapes))
    return result


def _launch(job: dict[str, Any], log_dir: Path) -> list[dict[str, Any]]:
    """Start `job["workers"]` processes on loopback; each one's result, the chief's first."""
    count = job["workers"]
    hosts = [f"127.0.0.1:{free_port()}" for _ in range(count)]
    procs = []
    for index in range(count):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
        env.pop("TF_CONFIG", None)
        if count > 1:
            env["TF_CONFIG"] = tf_config(hosts, index)
        err = open(log_dir / f"workers-{count}-{index}.log", "wb")
        procs.append((subprocess.Popen([*CHILD, json.dumps(job)], stdout=subprocess.PIPE,
                                       stderr=err, env=env), err))  # fmt: skip
    results = []
    try:
        for proc, err in procs:
            out, _ = proc.communicate(timeout=TIMEOUT_S)
            err.close()
            if proc.returncode != 0:
                tail = Path(err.name).read_text(errors="replace")[-2000:]
                raise RuntimeError(f"a benchmark worker exited {proc.returncode}: {tail}")
            results.append(json.loads(out.decode().strip().splitlines()[-1]))
    finally:
        for proc, err in procs:
            stop_process(proc, timeout_s=5.0)
            err.close()
    return results


def measure(preset_name: str, workers: int, steps: int, warmup: int, log_dir: Path) -> dict:
    """One worker, then `workers`, on the same steps; the figures."""
    from serving.model.config import get_preset

    preset = get_preset(preset_name)
    tokens = preset.train.batch_size * preset.model.context
    job = {"preset": preset_name, "steps": steps, "warmup": warmup}
    (one,) = _launch({**job, "workers": 1}, log_dir)
    many = _launch({**job, "workers": workers}, log_dir)
    one_s = statistics.fmean(one["step_s"])
    many_s = statistics.fmean(many[0]["step_s"])
    reduce_s = statistics.fmean(statistics.fmean(r["all_reduce_s"]) for r in many)
    return {
        "preset": preset.name,
        "workers": workers,
        "steps": steps,
        "warmup_steps": warmup,
        "global_batch": preset.train.batch_size,
        "tokens_per_step": tokens,
        "one_worker": {"step_ms": one_s * 1e3, "tokens_per_s": tokens / one_s},
        "n_workers": {
            "step_ms": many_s * 1e3,
            "tokens_per_s": tokens / many_s,
            "all_reduce_ms": reduce_s * 1e3,
            "collective_share": min(1.0, reduce_s / many_s),
            "gradient_bytes": many[0]["gradient_bytes"],
            "replicas": many[0]["replicas"],
        },
        "speedup": one_s / many_s,
        "collective_method": "the step's all-reduce timed alone, mean over the workers, "
        "over the chief's mean step time",
        "cpus": os.cpu_count(),
        "load_average_1m": os.getloadavg()[0],
    }


def report(r: dict[str, Any]) -> None:
    """The figures as a small table."""
    one, many = r["one_worker"], r["n_workers"]
    print(f"training step, preset {r['preset']}, global batch {r['global_batch']} "
          f"({r['tokens_per_step']} tokens), {r['steps']} steps after {r['warmup_steps']} "
          f"warm-up, {r['cpus']} CPUs, load {r['load_average_1m']:.1f}")  # fmt: skip
    print("                 ms/step    tokens/s")
    print(f"  1 worker    {one['step_ms']:10.1f}  {one['tokens_per_s']:10.0f}")
    print(f"  {r['workers']} workers   {many['step_ms']:10.1f}  {many['tokens_per_s']:10.0f}")
    print(f"  speed-up {r['speedup']:.2f}x; all-reduce of {many['gradient_bytes']} bytes "
          f"{many['all_reduce_ms']:.1f} ms alone, {many['collective_share']:.0%} of the "
          f"{r['workers']}-worker step")  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(_child(json.loads(sys.argv[1]))))
