"""What every `tokenpulse bench` shares beyond the load test's engine: latency summaries, timing,
RSS readings, CPU pinning, and the load generator's verdict.

Benches start the components they measure with stack.launch (the launchers the tests use too),
drive them with the load test's loops (stack.loadtest.engine: `closed_loop`, `open_loop`, with
the engine's watch on the generator itself), read /metrics with stack.loadtest.prom, CPU with
stack.loadtest.procstat and quantiles with stack.loadtest.stats; they print figures and ratios,
and never assert on timing.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from stack.launch import ModelServerProcess, running_modelserver
from stack.loadtest.engine import Limits, Recording, health
from stack.loadtest.stats import quantile
from tokenpulse import paths
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

DEFAULT_BATCHING = paths.BATCHING_PARAMETERS
DEFAULT_MODEL_BASE = Path("models") / DEFAULT_MODEL_NAME  # where `make model` writes


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a bench that starts a model server: which model, which batching config."""
    parser.add_argument(
        "--model-base-path",
        type=Path,
        default=DEFAULT_MODEL_BASE,
        help=f"base path with numeric version dirs (default {DEFAULT_MODEL_BASE})",
    )
    parser.add_argument("--model-name", default=DEFAULT_MODEL_NAME)
    parser.add_argument("--batching-parameters-file", type=Path, default=DEFAULT_BATCHING)


def model_missing(args: argparse.Namespace) -> bool:
    """Whether `--model-base-path` holds no model (then it says how to get one, on stderr)."""
    if args.model_base_path.is_dir():
        return False
    print(
        f"no model at {args.model_base_path}; build one (`make model`) or pass --model-base-path",
        file=sys.stderr,
    )
    return True


def bench_modelserver(
    args: argparse.Namespace, batching: bool = True
) -> contextlib.AbstractContextManager[ModelServerProcess]:
    """A quiet model server on the bench's model, batching on (with its parameters file) or off."""
    return running_modelserver(
        args.model_base_path,
        model_name=args.model_name,
        enable_batching=batching,
        batching_parameters_file=args.batching_parameters_file if batching else None,
        file_system_poll_wait_seconds=0,
        extra_args=["--log_level=WARNING"],
        env={"TF_CPP_MIN_LOG_LEVEL": "3"},
        start_timeout_s=180,
        stop_timeout_s=30,
    )


def latency_ms(seconds: Sequence[float]) -> dict[str, float]:
    """Mean, p50, p90, p99 and max of latencies given in seconds, in milliseconds (NaN if none)."""
    if not seconds:
        return dict.fromkeys(("mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"), math.nan)
    return {
        "mean_ms": statistics.fmean(seconds) * 1e3,
        **{f"p{q}_ms": cast(float, quantile(seconds, q / 100)) * 1e3 for q in (50, 90, 99)},
        "max_ms": max(seconds) * 1e3,
    }


def positive(text: str) -> int:
    """An argparse type: an integer of at least 1, else one line saying so."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def median_time(fn: Callable[[], Any], repeats: int) -> float:
    """Median seconds of `repeats` calls of `fn`, after one untimed warm-up call (tracing and
    first-call allocations are not what a bench measures)."""
    fn()
    times = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _proc_status(pid: int) -> dict[str, str]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


def rss_bytes(pid: int) -> tuple[int, int]:
    """(current, peak) resident set size of a process in bytes, from /proc (Linux)."""
    fields = _proc_status(pid)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


def cpu_split() -> tuple[set[int], set[int]] | None:
    """(all usable CPUs but the last, the last), or None with fewer than 2 CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    return (set(cpus[:-1]), {cpus[-1]}) if len(cpus) >= 2 else None


def pin(pid: int, cpus: set[int]) -> None:
    """Set the CPU affinity of every thread of a process (threads started later inherit it)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(tid), cpus)


def progress(bench: str, quiet: bool = False) -> Callable[[str], None]:
    """A function that reports a step on stderr (stdout keeps only the figures)."""

    def say(message: str) -> None:
        if not quiet:
            print(f"[bench {bench}] {message}", file=sys.stderr, flush=True)

    return say


@dataclass(kw_only=True)
class Tally:
    """One arm's closed-loop phases, summed: answers, failures, tokens, seconds, latencies to the
    first text (the whole answer where nothing streams) and to the end, and the server's batches."""

    requests: int = 0
    errors: int = 0
    tokens: int = 0
    seconds: float = 0.0
    first_s: list[float] = field(default_factory=list)
    total_s: list[float] = field(default_factory=list)
    batch_sum: float = 0.0
    batch_count: float = 0.0

    def add(self, rec: Recording, batches: tuple[float, float] = (0.0, 0.0)) -> None:
        """One phase: its recording, and the (sum, count) of batch sizes the server ran in it."""
        ok = [o for o in rec.outcomes if o.ok]
        self.requests += len(ok)
        self.errors += len(rec.outcomes) - len(ok)
        self.tokens += sum(o.output_tokens for o in ok)
        self.first_s += [o.latency_s if o.ttft_s is None else o.ttft_s for o in ok]
        self.total_s += [o.latency_s for o in ok]
        self.seconds += rec.end - rec.start
        self.batch_sum += batches[0]
        self.batch_count += batches[1]

    @property
    def mean_batch(self) -> float | None:
        """The server's mean processed batch over the phases (None: it ran none, or says not)."""
        return self.batch_sum / self.batch_count if self.batch_count else None


# a bench runs each phase to its end and reports a saturated generator beside its figures
LIMITS = Limits(stop=False)


def generator(recordings: Sequence[Recording]) -> dict[str, Any]:
    """The engine's verdict on the load generator over a bench's phases (engine.health)."""
    return health(recordings)


def generator_line(verdict: dict[str, Any]) -> str:
    """One line: whether the load generator, not the target, was the bottleneck (`generator`)."""
    cpu, lag = verdict["max_cpu"], verdict["max_loop_lag_s"]
    worst = "no phase ran a whole second"
    if cpu is not None:
        worst = f"its event loop used at most {cpu:.0%} of a core, woke {lag * 1e3:.0f} ms late"
    if verdict["saturated"]:
        return f"load generator: SATURATED ({worst}): {verdict['saturated']}"
    return f"load generator: not saturated ({worst})"
