"""Warmup batch sizes follow the serving batching config and never exceed its max_batch_size."""

from __future__ import annotations

from pathlib import Path

import pytest

from serving.model.warmup import (
    DEFAULT_WARMUP_BATCH_SIZES,
    SERVING_BATCHING_FILE,
    WarmupSizeError,
    choose_warmup_batch_sizes,
)


def batching(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "batching_parameters.txt"
    path.write_text(text)
    return path


def test_sizes_stop_at_max_batch_size(tmp_path: Path) -> None:
    path = batching(tmp_path, "max_batch_size { value: 16 }\n")
    assert choose_warmup_batch_sizes(None, path) == (1, 2, 4, 8, 16)
    path = batching(tmp_path, "max_batch_size { value: 12 }\n")
    assert choose_warmup_batch_sizes(None, path) == (1, 2, 4, 8, 12)


def test_allowed_batch_sizes_are_the_sizes_to_warm(tmp_path: Path) -> None:
    path = batching(
        tmp_path,
        "max_batch_size { value: 24 }\nallowed_batch_sizes: 6\nallowed_batch_sizes: 24\n",
    )
    assert choose_warmup_batch_sizes(None, path) == (6, 24)


def test_the_shipped_batching_config_is_the_default() -> None:
    sizes = choose_warmup_batch_sizes(None, SERVING_BATCHING_FILE)
    assert max(sizes) == 32 and sizes[0] == 1


def test_explicit_sizes_over_the_maximum_are_refused_with_the_fix(tmp_path: Path) -> None:
    path = batching(tmp_path, "max_batch_size { value: 16 }\n")
    assert choose_warmup_batch_sizes([1, 16], path) == (1, 16)
    with pytest.raises(WarmupSizeError) as err:
        choose_warmup_batch_sizes([8, 32], path)
    assert "[32] exceed max_batch_size 16" in str(err.value)
    assert "Use sizes up to 16" in str(err.value)


def test_without_a_batching_file_explicit_or_default_sizes_apply() -> None:
    assert choose_warmup_batch_sizes(None, None) == DEFAULT_WARMUP_BATCH_SIZES
    assert choose_warmup_batch_sizes([3], None) == (3,)
    with pytest.raises(WarmupSizeError, match="positive"):
        choose_warmup_batch_sizes([0], None)


def test_an_unreadable_batching_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WarmupSizeError, match="cannot read"):
        choose_warmup_batch_sizes(None, tmp_path / "missing.txt")
    with pytest.raises(WarmupSizeError, match="2:1"):
        choose_warmup_batch_sizes(None, batching(tmp_path, "max_batch_size { value: 4 }\nnope\n"))
