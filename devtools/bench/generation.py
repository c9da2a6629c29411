"""The timing loop both model benches share: models behind one `generate(batch, prompt_len,
new_tokens)` interface, timed in turns, as tokens/s per batch size and as the cost of one decode
step early and late in the window (`bench model`, and `bench model --preset-dir`)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

Say = Callable[[str], None]
BATCH_SIZES = (1, 8, 32)
PROMPT_LEN, NEW_TOKENS = 16, 64  # tokens of each timed prompt, and generated after it


class Runner:
    """One model's `generate(batch, prompt_len, new_tokens)` with a uniform interface."""

    def __init__(
        self,
        name: str,
        generate: Callable[[int, int, int], None],
        ops_per_step: Callable[[], dict[str, float]] | None = None,
    ) -> None:
        self.name = name
        self.generate = generate
        self.ops_per_step = ops_per_step


def interleaved_medians(calls: Mapping[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median seconds of each call, timed in turns (a, b, a, b, ...) after one untimed warm-up
    call each, so a burst of load elsewhere lands on both sides rather than on one."""
    for call in calls.values():
        call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(max(1, repeats)):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def throughput(
    runners: list[Runner], prompt_len: int, new_tokens: int, repeats: int, say: Say
) -> dict[str, dict[int, float]]:
    """Per runner: tokens/s at each of BATCH_SIZES, the runners timed in turns."""
    tps: dict[str, dict[int, float]] = {r.name: {} for r in runners}
    for batch in BATCH_SIZES:
        say(f"batch {batch}: " + " vs ".join(r.name for r in runners))
        calls = {r.name: partial(r.generate, batch, prompt_len, new_tokens) for r in runners}
        for name, secs in interleaved_medians(calls, repeats).items():
            tps[name][batch] = round(batch * new_tokens / secs, 1)
    return tps


def decode_cost(
    runners: list[Runner], context: int, repeats: int, say: Say
) -> dict[str, dict[str, float]]:
    """Per runner: ms per decode step at batch 8 early and late in the window (the difference
    of a long and a short run, so prefill cancels out), and late over early."""
    short, long = 8, 32

    def per_token(prompt_len: int) -> dict[str, float]:
        def timed(tokens: int) -> dict[str, float]:
            calls = {r.name: partial(r.generate, 8, prompt_len, tokens) for r in runners}
            return interleaved_medians(calls, repeats)

        t_long, t_short = timed(long), timed(short)
        return {name: (t_long[name] - t_short[name]) / (long - short) for name in t_long}

    say("decode cost early vs late in the window")
    early, late = per_token(8), per_token(context - long - 8)
    return {
        name: {
            "decode_ms_per_step_early": round(early[name] * 1e3, 3),
            "decode_ms_per_step_late": round(late[name] * 1e3, 3),
            "late_over_early": round(late[name] / early[name], 3),
        }
        for name in early
    }
