"""The shared timing loop's decode cost: paired differences keep a drifting host out of it."""

from __future__ import annotations

import pytest

from devtools.bench.generation import Runner, decode_cost

CONTEXT = 128
PREFILL_S = 0.050  # per run, whatever its length: the difference must cancel it
STEP_S = {8: 0.001, CONTEXT - 40: 0.0012}  # early and late: late/early is 1.2


class Host:
    """A fake clock that each generate call advances, on a host whose load ramps up: every call
    takes `slowdown` times longer than the one before it."""

    def __init__(self, slowdown: float) -> None:
        self.now, self.factor, self.slowdown = 0.0, 1.0, slowdown
        self.calls: list[tuple[int, int, int]] = []

    def clock(self) -> float:
        return self.now

    def generate(self, batch: int, prompt_len: int, tokens: int) -> None:
        self.calls.append((batch, prompt_len, tokens))
        self.now += self.factor * (PREFILL_S + tokens * STEP_S[prompt_len])
        self.factor *= self.slowdown


@pytest.mark.parametrize("slowdown", [1.0, 1.02])
def test_the_per_step_cost_and_late_over_early_survive_a_load_ramp(slowdown: float) -> None:
    # 1.02 a call: the host is 1.9x slower at the end than at the start (timing all the long
    # runs, then all the short ones, early and then late, made late/early 1.8 of this ramp)
    host = Host(slowdown)
    costs = decode_cost([Runner("m", host.generate)], CONTEXT, 3, lambda _: None, host.clock)
    figures = costs["m"]
    assert figures["late_over_early"] == pytest.approx(1.2, rel=0.06)
    assert figures["decode_ms_per_step_early"] > 0 and figures["decode_ms_per_step_late"] > 0
    if slowdown == 1.0:
        assert figures["decode_ms_per_step_early"] == pytest.approx(1.0)
        assert figures["decode_ms_per_step_late"] == pytest.approx(1.2)
    timed = host.calls[4:]  # after one warm-up call of each shape
    assert len(timed) == 13 * 2 * 2  # repeats 3: 13 pairs at each position
    assert {c[0] for c in host.calls} == {8} and {c[2] for c in timed} == {8, 32}


def test_runners_take_turns_pair_by_pair() -> None:
    host_a, host_b = Host(1.0), Host(1.0)
    order: list[str] = []

    def runner(name: str, host: Host) -> Runner:
        def generate(batch: int, prompt_len: int, tokens: int) -> None:
            order.append(name)
            host.generate(batch, prompt_len, tokens)

        return Runner(name, generate)

    clock = {"t": 0.0}

    def now() -> float:
        clock["t"] = host_a.now + host_b.now
        return clock["t"]

    costs = decode_cost([runner("a", host_a), runner("b", host_b)], CONTEXT, 2, lambda _: None, now)
    assert set(costs) == {"a", "b"}
    assert order[8:16] == ["a"] * 4 + ["b"] * 4  # a's two pairs, then b's, in the first round
    assert len(order) == 8 + 2 * 4 * 9  # repeats 2: 9 pairs a position; repeats 1 would be one
