"""Workload: distributions, prompts files, keys in turn, the shipped Chinese mix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stack.loadtest.workload import (
    PROMPTS,
    WORKLOADS,
    Cycle,
    Distribution,
    Workload,
    WorkloadError,
)


@pytest.mark.parametrize(
    ("spec", "lo", "hi"),
    [("16", 16, 16), ("8-12", 8, 12), ("normal:20,2", 1, 40), ("choice:4,8", 4, 8)],
)
def test_distributions_draw_within_their_bounds(spec: str, lo: int, hi: int) -> None:
    w = Workload(prompt_chars="4", max_new_tokens=spec, seed=1)
    draws = [w.next().max_new_tokens for _ in range(200)]
    assert lo <= min(draws) and max(draws) <= hi


@pytest.mark.parametrize("spec", ["x", "9-3", "normal:1", "gamma:1,2", ""])
def test_a_bad_distribution_is_one_clear_error(spec: str) -> None:
    with pytest.raises(WorkloadError, match="bad distribution"):
        Distribution(spec)


def test_synthetic_prompts_have_the_drawn_length_and_keys_go_in_turn() -> None:
    w = Workload(prompt_chars="20-30", max_new_tokens="8", keys=3, seed=2)
    items = [w.next() for _ in range(6)]
    assert all(15 <= len(i.prompt) <= 30 for i in items)
    assert [i.key_index for i in items] == [0, 1, 2, 0, 1, 2]
    again = Workload(prompt_chars="20-30", max_new_tokens="8", keys=3, seed=2)
    assert [again.next() for _ in range(6)] == items


def test_the_shipped_chinese_customer_service_mix_loads() -> None:
    w = Workload(max_new_tokens="16", prompts_file=WORKLOADS / "customer_service_zh.jsonl")
    prompts = {w.next().prompt for _ in range(300)}
    assert len(prompts) > 10
    assert any("订单" in p for p in prompts)


def test_a_prompts_file_line_without_a_prompt_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"prompt": "hi"}) + "\n" + json.dumps({"text": "x"}) + "\n")
    with pytest.raises(WorkloadError, match=r"p\.jsonl:2"):
        Workload(prompts_file=path)


def test_a_cycle_asks_the_same_requests_in_the_same_order_from_where_it_starts() -> None:
    first = [Cycle(8, 0.8).next() for _ in range(1)][0]
    assert (first.prompt, first.max_new_tokens, first.seed, first.temperature) == (
        PROMPTS[0], 8, 0, 0.8,
    )  # fmt: skip
    a, b = Cycle(8, first=100), Cycle(8, first=100)
    items = [a.next() for _ in range(len(PROMPTS) + 1)]
    assert items == [b.next() for _ in range(len(PROMPTS) + 1)]
    assert [i.seed for i in items] == list(range(100, 100 + len(PROMPTS) + 1))
    assert items[len(PROMPTS)].prompt == items[0].prompt == PROMPTS[100 % len(PROMPTS)]
    greedy = Cycle(4, seeded=False, prompts=("only",)).next()
    assert (greedy.prompt, greedy.seed, greedy.temperature) == ("only", None, None)
