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


def pairs(repeats: int) -> int:
    """Paired runs per decode-cost figure: more than the `repeats` of a plain timing, since the
    figure is a difference of two timings, and odd, so the median is one pair's. Three runs of
    `bench model --preset default` timed phase by phase (all long runs, then all short ones;
    3 repeats) gave our late/early 1.67, 0.52 and 1.79 on a shared machine; 13 pairs gave 1.28
    and 1.25. One repeat (a quick run, as the tests make) times one pair."""
    return 4 * repeats + 1 if repeats > 1 else 1


def decode_cost(
    runners: list[Runner],
    context: int,
    repeats: int,
    say: Say,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, dict[str, float]]:
    """Per runner: ms per decode step at batch 8 early and late in the window, and late over
    early.

    One step's cost is the difference of a long and a short run from the same prompt, so the
    prefill cancels out. The two runs of a difference go back to back (a pair), each pair's
    difference is kept, and the figure is the median of the differences: load elsewhere that
    drifts during the bench moves both runs of a pair alike, where timing all the long runs and
    then all the short ones put the drift into the difference. Pairs go round-robin over the
    runners and the two positions, and which run of a pair goes first alternates."""
    short, long = 8, 32
    positions = {"early": 8, "late": context - long - 8}
    steps: dict[tuple[str, str], list[float]] = {
        (r.name, where): [] for r in runners for where in positions
    }
    say("decode cost early vs late in the window")
    for r in runners:  # one untimed warm-up of each shape
        for prompt_len in positions.values():
            for tokens in (short, long):
                r.generate(8, prompt_len, tokens)
    for i in range(pairs(repeats)):
        for r in runners:
            for where, prompt_len in positions.items():
                took = {}
                for tokens in (short, long) if i % 2 == 0 else (long, short):
                    start = clock()
                    r.generate(8, prompt_len, tokens)
                    took[tokens] = clock() - start
                steps[(r.name, where)].append((took[long] - took[short]) / (long - short))
    out = {}
    for r in runners:
        early = statistics.median(steps[(r.name, "early")])
        late = statistics.median(steps[(r.name, "late")])
        out[r.name] = {
            "decode_ms_per_step_early": round(early * 1e3, 3),
            "decode_ms_per_step_late": round(late * 1e3, 3),
            "late_over_early": round(late / early, 3),
        }
    return out
