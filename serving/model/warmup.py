"""Which batch sizes an export's warmup records use: never more than the server will accept.

TF Serving replays every warmup record before a version turns AVAILABLE; under batching a record
larger than `max_batch_size` fails with "Task size N is larger than maximum input batch size M"
and the version never loads. So the sizes follow the serving batching config (its
`allowed_batch_sizes`, else powers of two up to `max_batch_size`) or an explicit list checked
against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokenpulse import paths

DEFAULT_WARMUP_BATCH_SIZES = (1, 2, 4, 8, 16, 32)
SERVING_BATCHING_FILE = paths.BATCHING_PARAMETERS


class WarmupSizeError(ValueError):
    """Warmup batch sizes the serving batching config would reject, or an unreadable config."""


def sizes_up_to(max_batch_size: int, allowed: Sequence[int] = ()) -> tuple[int, ...]:
    """The batch sizes worth warming: the allowed sizes, else powers of two plus the maximum."""
    if allowed:
        return tuple(s for s in allowed if s <= max_batch_size)
    sizes = []
    size = 1
    while size < max_batch_size:
        sizes.append(size)
        size *= 2
    return (*sizes, max_batch_size)


def choose_warmup_batch_sizes(
    requested: Sequence[int] | None, batching_file: Path | None
) -> tuple[int, ...]:
    """The explicit list (checked against the batching file), or what the batching file allows."""
    if requested is not None and (not requested or any(s <= 0 for s in requested)):
        raise WarmupSizeError(f"warmup batch sizes must be positive, got {list(requested)}")
    shipped_but_absent = batching_file == SERVING_BATCHING_FILE and not batching_file.exists()
    if batching_file is None or shipped_but_absent:
        return tuple(requested) if requested is not None else DEFAULT_WARMUP_BATCH_SIZES
    from serving.modelserver.config_files import ConfigFileError, parse_batching_parameters

    try:
        params = parse_batching_parameters(batching_file)
    except ConfigFileError as exc:
        raise WarmupSizeError(str(exc)) from exc
    if requested is None:
        return sizes_up_to(params.max_batch_size, params.allowed_batch_sizes)
    too_big = [s for s in requested if s > params.max_batch_size]
    if too_big:
        raise WarmupSizeError(
            f"warmup batch sizes {too_big} exceed max_batch_size {params.max_batch_size} of "
            f"{batching_file}; the server would refuse to load the version. Use sizes up to "
            f"{params.max_batch_size}"
        )
    return tuple(requested)
